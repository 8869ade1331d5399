package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/workflows"
)

// runAction runs a role's named action on members, as Juju's actions and BOSH's errands.
func runAction(ctx context.Context, args []string) error {
	fs := newFlagSet("run", "NAME ACTION [--role R] [--members A,B] [--param k=v]... [--parallel N] [--wait [--timeout D]]")
	var conn connection
	conn.register(fs, "warn")
	role := fs.String("role", "", "run it on every ready member of this role")
	members := fs.StringSlice("members", nil, "run it on these members (comma-separated)")
	params := fs.StringArray("param", nil, "a parameter k=v for the script (--param k=v); repeat for more")
	parallel := fs.Int("parallel", 0, "how many members run it at once (0: all)")
	wait, timeout := waitFlags(fs, "wait until it ran everywhere, and show each member's result")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 2 {
		return apperr.Errorf(apperr.Invalid, "run needs a cluster name and an action: clusterflow run NAME ACTION")
	}
	name, action := fs.Arg(0), fs.Arg(1)
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	started, err := st.RunAction(ctx, name, workflows.ActionRequest{Action: action, Role: *role, Members: *members, Params: *params, Parallel: *parallel})
	if err != nil {
		return err
	}
	if !*wait {
		fmt.Printf("Cluster %s: action %s (%d) asked for; see `clusterflow status %s`.\n", name, action, started.ID, name)
		return nil
	}
	final, err := waitFor(ctx, st, name, *timeout, func(s workflows.ClusterStatus) bool {
		a := s.Action(started.ID)
		return a == nil || a.State == workflows.ActionDone || a.State == workflows.ActionCanceled
	})
	if err != nil {
		return err
	}
	a := final.Action(started.ID)
	if a == nil {
		return apperr.Errorf(apperr.Failed, "action %d of %s is no longer listed", started.ID, name)
	}
	render.Action(os.Stdout, *a)
	switch {
	case a.State == workflows.ActionCanceled:
		return apperr.Errorf(apperr.Failed, "action %s on %s was canceled", action, name)
	case a.Failed > 0:
		return apperr.Errorf(apperr.Failed, "action %s failed on %d of %d members", action, a.Failed, a.Ran)
	}
	return nil
}
