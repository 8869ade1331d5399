package docker

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/clusterflow/clusterflow/internal/runner"
)

// ExecOptions are a script's run inside a member's container.
type ExecOptions struct {
	Engine, Container string
	// User is who the script runs as (uid:gid; empty: the container's user).
	User string
	// Argv is the script and its arguments; Env its environment, without PATH (the
	// image's holds) and with TMPDIR the container's own.
	Argv, Env []string
	// Dir is where it starts: the member's folder, at the same path inside.
	Dir string
	// Grace is how long the script has between SIGTERM and SIGKILL once stopped.
	Grace time.Duration
	// Stdout and Stderr receive its output.
	Stdout, Stderr io.Writer
}

// ExitEngineFailed is the status of a run the engine would not start (the container is
// gone, say): the engine's words are on stderr.
const ExitEngineFailed = 125

// Exec runs the script in the container through the engine and returns its exit status.
// When stop is closed (the agent stopped the run: SIGTERM to what it started) the
// script's processes get SIGTERM, and SIGKILL after the grace period; Exec returns once
// they have ended.
func Exec(stop <-chan struct{}, o ExecOptions) (int, error) {
	ctx := context.Background() // the engine's calls outlive a stop: its end is waited for
	engine, err := client.New(client.WithHost(o.Engine), client.WithAPIVersionNegotiation())
	if err != nil {
		return ExitEngineFailed, err
	}
	defer engine.Close()
	created, err := engine.ExecCreate(ctx, o.Container, client.ExecCreateOptions{
		User: o.User, Cmd: o.Argv, Env: o.Env, WorkingDir: o.Dir, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return ExitEngineFailed, fmt.Errorf("run in container %s: %w", o.Container, err)
	}
	attached, err := engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return ExitEngineFailed, fmt.Errorf("run in container %s: %w", o.Container, err)
	}
	defer attached.Close()
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(o.Stdout, o.Stderr, attached.Reader)
		copied <- err
	}()
	var killAt <-chan time.Time
	for {
		select {
		case <-stop:
			stop = nil
			signalExec(ctx, engine, created.ID, syscall.SIGTERM)
			killAt = time.After(o.Grace)
			continue
		case <-killAt:
			signalExec(ctx, engine, created.ID, syscall.SIGKILL)
			continue
		case err = <-copied:
		}
		break
	}
	// The stream ends as the script does; its status follows within moments.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, inspectErr := engine.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if inspectErr != nil {
			return ExitEngineFailed, fmt.Errorf("read the run's status: %w", inspectErr)
		}
		if !got.Running {
			return got.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return ExitEngineFailed, fmt.Errorf("the run's output ended (%v) but the engine still has it running", err)
		}
	}
}

// signalExec signals the exec's process and every process it started that is still its
// descendant. The engine has no call for it, but gives the process's ID on the host,
// whose /proc shows the rest.
func signalExec(ctx context.Context, engine *client.Client, execID string, sig syscall.Signal) {
	got, err := engine.ExecInspect(ctx, execID, client.ExecInspectOptions{})
	if err != nil || got.PID < 2 {
		return
	}
	for _, pid := range runner.Descendants(got.PID) {
		_ = syscall.Kill(pid, sig)
	}
}

// ExecEnv is the environment a script gets in its container from the one its run was
// given on the host: the host's PATH is no use there, and the cluster's temporary folder
// on the host is not mounted (the container has a /tmp of its own).
func ExecEnv(host []string) []string {
	env := slices.DeleteFunc(slices.Clone(host), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "TMPDIR=")
	})
	return append(env, "TMPDIR=/tmp")
}
