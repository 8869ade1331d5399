package cluster

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A member being set up on a host that is lost is set up elsewhere (rehome). Its sandbox on
// the lost host, where its script may even still run, is stale: once the host is back, the
// next pass removes it there, stopping what it runs, and tells no one, since the member
// lives elsewhere. Reconcile finds any that were missed: a sandbox of a known member on a
// host that is not the member's.

// noteStaleHostsBack starts a pass when a host holding stale sandboxes comes back, and
// forgets the stale sandboxes of hosts forgotten.
func (hw *hostWatcher) noteStaleHostsBack(ctx workflow.Context, before []plan.Host) {
	if len(hw.state.Stale) == 0 {
		return
	}
	hw.state.Stale = slices.DeleteFunc(hw.state.Stale, func(s workflows.StaleMember) bool { return hw.hostOf(s.Host) == nil })
	var back []string
	for _, s := range hw.state.Stale {
		prev := plan.Named(before, s.Host, func(h *plan.Host) string { return h.Name })
		if hw.reachable(s.Host) && (prev == nil || prev.Lost) && !slices.Contains(back, s.Host) {
			back = append(back, s.Host)
		}
	}
	if len(back) > 0 {
		hw.newGeneration(fmt.Sprintf("host %s is back: remove the sandboxes of members set up elsewhere", plan.Abbreviate(back)))
		hw.touch(ctx)
	}
}

// removeStale removes the stale sandboxes on hosts that can be reached, at once; those on
// hosts still lost wait for them.
func (hw *hostWatcher) removeStale(ctx workflow.Context) {
	var now []workflows.StaleMember
	for _, s := range hw.state.Stale {
		if hw.reachable(s.Host) {
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
				ref := hw.memberRef(s.Role, s.Member)
				err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, "remove stale "+s.Member), s.Host), flow.ActRemoveMember, ref).Get(ctx, nil)
				if err != nil {
					hw.logger.Warn("Could not remove a stale sandbox; trying again next pass", "Member", s.Member, "Host", s.Host, "Error", err)
					return
				}
				removed[i] = true
				hw.logger.Info("Removed a stale sandbox", "Member", s.Member, "Host", s.Host)
			})
		}
		wg.Wait(ctx)
	}
	hw.state.Stale = slices.DeleteFunc(hw.state.Stale, func(s workflows.StaleMember) bool {
		i := slices.Index(now, s)
		return i >= 0 && removed[i]
	})
}

// staleAtOnce bounds the stale sandboxes removed at once.
const staleAtOnce = 200

// noteStale records a sandbox reconcile found of a known member on a host not its own.
func (c *cluster) noteStale(ref backend.MemberRef) bool {
	s := workflows.StaleMember{Role: ref.Role, Member: ref.Name, Host: ref.Host}
	if ref.Host == "" || slices.Contains(c.state.Stale, s) {
		return false
	}
	c.state.Stale = append(c.state.Stale, s)
	return true
}
