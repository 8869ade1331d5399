package announce

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// TellRemoving tells the survivors subscribed to removing of the members the level's
// graceful removal is about to take, before their decommission (see spec.EventRemoving):
// a notice per role, to the survivors that know them. When a survivor's removing fails
// (it is then in config_error, as after any notification), the members it was told of are
// held: neither decommissioned nor torn down until retry tells the removing again.
func TellRemoving(ctx workflow.Context, c Cluster, o Options, step plan.Step) {
	leaving := plan.Removing(c.Desired(), c.State().Roles, step.Roles, step.ReplacedToo)
	if len(leaving) == 0 {
		return
	}
	// The survivors read the members leaving as leaving in configmeta, with their addresses.
	if err := c.WriteClusterFiles(ctx, false); err != nil {
		c.Logger().Warn("Could not refresh configmeta before a removing notice", "Error", err)
	}
	for _, rw := range leaving {
		told := notify(ctx, c, o, plan.OpRemoving, rw.Role, rw.Members)
		if ctx.Err() != nil {
			return // told again by the next removal
		}
		var failed []string
		for _, t := range told {
			rs := c.State().Role(t.Role)
			for _, m := range t.Members {
				if live := rs.Member(m.Name); live != nil && live.State == plan.MemberConfigError && live.Event == spec.EventRemoving {
					failed = append(failed, live.Name)
				}
			}
		}
		rs := c.State().Role(rw.Role)
		for _, n := range rw.Members {
			live := rs.Member(n.Name)
			switch {
			case live == nil:
			case len(failed) == 0:
				live.RemovingTold = true
			default:
				live.Decommission = plan.DecommissionFailed
				live.Detail = spec.Clip(fmt.Sprintf("removal held: removing failed on %s (see its output); once its cause is fixed, `clusterflow retry %s` runs it again", spec.Some(failed, flow.RefusalNames), c.State().Name), workflows.MaxDetail)
			}
		}
		c.Touch(ctx)
	}
}
