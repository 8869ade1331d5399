package cli

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/workflows"
)

func runDelete(ctx context.Context, args []string) error {
	fs := newFlagSet("delete", "NAME [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	wait, timeout := waitFlags(fs, "wait until every member is torn down and removed")
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	status, err := st.Delete(ctx, name)
	if err != nil {
		return err
	}
	if status.Phase == workflows.PhaseDeleted {
		fmt.Printf("Cluster %s is already deleted.\n", name)
		return nil
	}
	fmt.Printf("Deleting cluster %s.\n", name)
	if !*wait {
		return nil
	}
	final, err := waitFor(ctx, st, name, *timeout, func(s workflows.ClusterStatus) bool { return s.Phase == workflows.PhaseDeleted })
	if err != nil {
		return err
	}
	return teardownsFailed(final, func(f workflows.FailedTeardown) bool { return f.Reason == "delete" })
}
