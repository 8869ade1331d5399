package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func runApply(ctx context.Context, args []string) error {
	fs := newFlagSet("apply", "-f SPEC [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	signKeyFlag(fs, &conn.signKey)
	file := fs.StringP("file", "f", "", "the cluster's new spec (YAML)")
	wait, timeout := waitFlags(fs, "wait until the cluster matches the spec (or fails), showing progress")
	dryRun := fs.Bool("dry-run", false, "print what the apply would do (the revision, the members added, removed and updated, the rollout's batches), and change nothing")
	c, st, closeClient, err := specCommand(ctx, fs, &conn, file, args)
	if err != nil {
		return err
	}
	defer closeClient()
	if *dryRun {
		preview, err := st.Preview(ctx, c.Name, &c, nil)
		if err == nil {
			render.Preview(os.Stdout, c.Name, preview)
		}
		return err
	}
	res, err := st.Apply(ctx, c)
	if err != nil {
		return err
	}
	return reportChange(ctx, st, c.Name, res, *wait, *timeout)
}

// reportChange says what an accepted resize or apply became, and waits for it if asked.
func reportChange(ctx context.Context, st *starter.Starter, name string, res workflows.ChangeResult, wait bool, timeout time.Duration) error {
	if !res.Changed {
		fmt.Printf("Cluster %s already has that size and shape (generation %d); nothing to do.\n", name, res.Generation)
		if s, err := st.Status(ctx, name); err == nil {
			if hint := render.RetryHint(s); hint != "" {
				fmt.Printf("It failed, though: %s.\n", hint)
			}
		}
		return nil
	}
	if res.Revision > 0 {
		fmt.Printf("Cluster %s: %s (generation %d, revision %d: rolling out).\n", name, res.Summary, res.Generation, res.Revision)
	} else {
		fmt.Printf("Cluster %s: %s (generation %d).\n", name, res.Summary, res.Generation)
	}
	if !wait {
		fmt.Printf("Follow it with `clusterflow status %s`.\n", name)
		return nil
	}
	return waitSettled(ctx, st, name, timeout, res.Generation)
}
