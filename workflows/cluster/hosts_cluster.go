package cluster

import (
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A cluster deployed while hosts were registered places every member on a host
// (workflows/hosts); the registry pushes it the view of all hosts, and it tells the
// registry how many members it has where.

// dropUnreachable takes members on hosts that cannot be reached out of the work: nothing
// can run there. They are forgotten as if removed; should the host come back, reconcile
// finds their sandboxes and removes them as rogues.
func (e *executor) dropUnreachable(work []plan.RoleWork, now time.Time) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		var reachable []plan.Member
		var dropped []plan.Member
		for _, m := range rw.Members {
			if m.Host == "" || hosts.Reachable(&e.w.state, m.Host) {
				reachable = append(reachable, m)
				continue
			}
			_, live := e.w.state.FindMember(m.Name)
			live.State, live.Since = plan.MemberDeleted, now
			live.Detail = fmt.Sprintf("left on host %s, which is lost; its sandbox is removed if the host comes back", m.Host)
			dropped = append(dropped, m)
		}
		e.w.noteRemoved(rw.Role, dropped)
		if len(reachable) > 0 {
			rw.Members = reachable
			kept = append(kept, rw)
		}
	}
	return kept
}
