package cluster

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// removeStale removes the stale sandboxes on hosts that can be reached, at once; those on
// hosts still lost wait for them.
func (e *executor) removeStale(ctx workflow.Context) {
	var now []workflows.StaleMember
	for _, s := range e.w.state.Stale {
		if hosts.Reachable(&e.w.state, s.Host) {
			now = append(now, s)
		}
	}
	if len(now) == 0 {
		return
	}
	removed := make([]bool, len(now))
	// A lost host may have held thousands: at most staleAtOnce removals are pending at a
	// time, far under Temporal's 2,000 pending activities.
	for first := 0; first < len(now); first += staleAtOnce {
		wg := workflow.NewWaitGroup(ctx)
		for i := first; i < min(first+staleAtOnce, len(now)); i++ {
			s := now[i]
			wg.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				ref := e.w.memberRef(s.Role, s.Member)
				err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, "remove stale "+s.Member), s.Host), flow.ActRemoveMember, ref).Get(ctx, nil)
				if err != nil {
					e.w.logger.Warn("Could not remove a stale sandbox; trying again next pass", "Member", s.Member, "Host", s.Host, "Error", err)
					return
				}
				removed[i] = true
				e.w.logger.Info("Removed a stale sandbox", "Member", s.Member, "Host", s.Host)
			})
		}
		wg.Wait(ctx)
	}
	e.w.state.Stale = slices.DeleteFunc(e.w.state.Stale, func(s workflows.StaleMember) bool {
		i := slices.Index(now, s)
		return i >= 0 && removed[i]
	})
}

// staleAtOnce bounds the stale sandboxes removed at once.
const staleAtOnce = 200
