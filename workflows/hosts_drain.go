package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// Draining a host replaces each of its members by one on another host, like a member
// reported gone, but paced: in dependency order (a level's members only once the levels
// before it are off the host) and within each role's maxUnavailable. Each step is a
// replacement generation; the next step starts when a view of the hosts arrives or an
// operation ends.

// planDrain picks the members of draining hosts to replace now: those of the first level
// that still has any on a draining host, as many per role as its maxUnavailable leaves
// room for. limit gives a role's maxUnavailable as a count.
func planDrain(roles []roleState, levels [][]string, draining func(host string) bool, limit func(rs roleState) int) []string {
	for _, level := range levels {
		var picked []string
		levelHas := false
		for _, name := range level {
			rs := roleOf(roles, name)
			if rs == nil {
				continue
			}
			room := limit(*rs) - countState(rs.Members, unavailableStates...)
			for _, m := range rs.Members {
				if m.Host == "" || !draining(m.Host) || m.State == MemberDeleted || m.State == MemberRogue {
					continue
				}
				levelHas = true
				if m.State != MemberReady || m.Leaving || room <= 0 {
					continue // on its way out, unwell (health's concern), or no room yet
				}
				picked = append(picked, m.Name)
				room--
			}
		}
		if levelHas {
			return picked
		}
	}
	return nil
}

// drain takes the next step of draining any draining host.
func (w *clusterWorkflow) drain(ctx workflow.Context) {
	if !w.onHosts() || w.deleteRequested {
		return
	}
	draining := func(host string) bool {
		h := w.hostOf(host)
		return h != nil && h.Draining && !h.Lost
	}
	names := planDrain(w.state.Roles, w.state.Levels, draining, func(rs roleState) int { return w.unavailableLimit(&rs) })
	for _, name := range names {
		rs, m := w.findMember(name)
		w.stepHealth(ctx, rs, m, MemberEvent{Member: name, Event: HealthDrain, Reason: fmt.Sprintf("host %s is draining", m.Host), Source: "hosts", At: workflow.Now(ctx)})
	}
}
