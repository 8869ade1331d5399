package cli

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/workflows"
)

func runCancel(ctx context.Context, args []string) error {
	fs := newFlagSet("cancel", "NAME [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	wait, timeout := waitFlags(fs, "wait until the running scripts are stopped and the cluster is stable")
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	if _, err := st.Cancel(ctx, name); err != nil {
		return err
	}
	fmt.Printf("Canceling the operation in progress on %s.\n", name)
	if !*wait {
		return nil
	}
	final, err := waitFor(ctx, st, name, *timeout, func(s workflows.ClusterStatus) bool { return s.Phase.Stable() })
	if err == nil {
		fmt.Printf("Cluster %s is %s: %s\n", name, final.Phase, final.Message)
	}
	return err
}
