package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/internal/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func runDeploy(ctx context.Context, args []string) error {
	fs := newFlagSet("deploy", "-f SPEC [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	file := fs.StringP("file", "f", "", "cluster spec (YAML)")
	wait := fs.Bool("wait", false, "wait until the cluster is ready or failed, showing progress")
	timeout := fs.Duration("timeout", 0, "with --wait, give up waiting after this long (0 waits forever)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *file == "" {
		fs.Usage()
		return badInput{fmt.Errorf("-f SPEC is required")}
	}
	// Validate before connecting: an invalid spec starts nothing, server or not.
	c, err := spec.Load(*file)
	if err != nil {
		return err
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if err := st.Deploy(ctx, c); err != nil {
		return err
	}
	fmt.Printf("Deploying %s (workflow %s).\n", workflows.Summary(c), workflows.ClusterWorkflowID(c.Name))
	if !*wait {
		fmt.Printf("Follow it with `clusterflow status %s`.\n", c.Name)
		return nil
	}
	_, err = waitForPhase(ctx, st, c.Name, *timeout, workflows.Phase.Stable)
	return err
}

// waitForPhase shows progress until the cluster reaches a phase done accepts, and turns a
// failed cluster into exit status 1 with the failing members' output.
func waitForPhase(ctx context.Context, st *starter.Starter, name string, timeout time.Duration, done func(workflows.Phase) bool) (workflows.ClusterStatus, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	progress := render.NewProgress(os.Stdout)
	final, err := st.Watch(ctx, name, starter.WatchOptions{
		Until:    func(s workflows.ClusterStatus) bool { return done(s.Phase) },
		OnChange: progress.Update,
		OnNoWorker: func(err error) {
			fmt.Fprintf(os.Stderr, "Waiting: %v\n", err)
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			where := "before any worker answered"
			if final.Phase != "" {
				where = "in phase " + string(final.Phase)
			}
			return final, failure{fmt.Sprintf("stopped waiting for %s %s: %v (it carries on; see `clusterflow status %s`)", name, where, ctx.Err(), name)}
		}
		return final, err
	}
	if final.Phase == workflows.PhaseFailed {
		for _, r := range final.Roles {
			for _, m := range r.Members {
				if m.State == workflows.MemberConfigError {
					fmt.Printf("\n%s: %s\n", m.Name, m.Detail)
					render.Tails(os.Stdout, m)
				}
			}
		}
		return final, failure{fmt.Sprintf("cluster %s failed: %s", name, final.Message)}
	}
	return final, nil
}
