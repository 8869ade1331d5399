package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend/docker"
)

// runContainerExec is what a host's agent starts in place of a startscript that runs in a
// member's container (the docker backend): it runs the script there and exits with its
// status, which the agent's wrapper keeps. A SIGTERM (the run stopped) reaches the script.
func runContainerExec(ctx context.Context, args []string) error {
	fs := newFlagSet("container-exec", "--engine HOST --container NAME [--grace D] -- SCRIPT [ARG...]")
	engine := fs.String("engine", "", "the Docker engine's address")
	container := fs.String("container", "", "the member's container")
	user := fs.String("user", "", "who the script runs as in the container, uid:gid (default: the image's user)")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopped")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *engine == "" || *container == "" || fs.NArg() == 0 {
		return apperr.Errorf(apperr.Invalid, "container-exec needs --engine, --container and a script to run")
	}
	dir, _ := os.Getwd()
	code, err := docker.Exec(ctx.Done(), docker.ExecOptions{
		Engine: *engine, Container: *container, User: *user, Argv: fs.Args(), Env: docker.ExecEnv(os.Environ()),
		Dir: dir, Grace: *grace, Stdout: os.Stdout, Stderr: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterflow:", err)
	}
	os.Exit(code)
	return nil
}
