package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// portAsksPerActivity bounds the members one AssignPorts names: about 100 bytes each
// asked and answered, with up to spec.MaxRolePorts ports.
const portAsksPerActivity = 1000

// assignPorts gives the pending members of the level's roles their ports before configmeta
// lists them, so that members set up together know each other's: as the role writes them
// where each member has a host to itself (maxPerHost 1), and otherwise from their host,
// which keeps them apart from every other member there. A member keeps its ports for life.
func (e *executor) assignPorts(ctx workflow.Context, roles []string) error {
	asks := map[string][]backend.PortAsk{} // by host
	for _, name := range roles {
		r, ok := e.w.spec.Role(name)
		rs := e.w.state.Role(name)
		if !ok || rs == nil || len(r.Ports) == 0 {
			continue
		}
		names := slices.Sorted(maps.Keys(r.Ports))
		for i := range rs.Members {
			m := &rs.Members[i]
			if m.State != plan.MemberPending || m.Ports != nil || m.Unplaced != "" {
				continue
			}
			if e.w.state.OnHosts && r.Placement.MaxPerHost == 1 {
				m.Ports = maps.Clone(r.Ports)
				continue
			}
			asks[m.Host] = append(asks[m.Host], backend.PortAsk{Member: m.Name, Names: names})
		}
	}
	var problems []string
	for _, host := range slices.Sorted(maps.Keys(asks)) {
		// A bounded number of members an activity: a wide role's request and answer stay
		// far below Temporal's payload limit.
		for chunk := range slices.Chunk(asks[host], portAsksPerActivity) {
			var got backend.PortAssignment
			req := backend.PortRequest{Cluster: e.w.Folder(), Members: chunk}
			if err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, fmt.Sprintf("assign ports to %d members", len(req.Members))), host), flow.ActAssignPorts, req).Get(ctx, &got); err != nil {
				problems = append(problems, flow.ErrorMessage(err))
				break
			}
			for _, ask := range req.Members {
				if _, m := e.w.state.FindMember(ask.Member); m != nil {
					m.Ports = got[ask.Member]
				}
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
