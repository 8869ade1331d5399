package cli

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func runDeploy(ctx context.Context, args []string) error {
	fs := newFlagSet("deploy", "-f SPEC [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	signKeyFlag(fs, &conn.signKey)
	file := fs.StringP("file", "f", "", "cluster spec (YAML)")
	wait, timeout := waitFlags(fs, "wait until the cluster is ready or failed, showing progress")
	continueAsNewEvery := fs.Int("continue-as-new-every", 0, "continue the cluster workflow as new after every N operations (for testing; default: when Temporal suggests it, or every 50)")
	_ = fs.MarkHidden("continue-as-new-every")
	c, st, closeClient, err := specCommand(ctx, fs, &conn, file, args)
	if err != nil {
		return err
	}
	defer closeClient()
	if err := st.Deploy(ctx, c, starter.DeployOptions{ContinueAsNewEvery: *continueAsNewEvery}); err != nil {
		return err
	}
	fmt.Printf("Deploying %s (workflow %s).\n", workflows.Summary(c), workflows.ClusterWorkflowID(c.Name))
	if !*wait {
		fmt.Printf("Follow it with `clusterflow status %s`.\n", c.Name)
		return nil
	}
	return waitSettled(ctx, st, c.Name, *timeout, 1)
}
