package cluster

import (
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// restartTargets are the members a rolling restart would restart, by role, or why it is
// refused.
func (u *updates) restartTargets(req workflows.RestartRequest) (map[string][]string, error) {
	if err := u.refuseChange("restart"); err != nil {
		return nil, err
	}
	return rollout.RestartTargets(&u.w.state, u.w.spec, req)
}

// actionTargets are the members an action would run on, by role, or why it is refused.
func (u *updates) actionTargets(req workflows.ActionRequest) (map[string][]string, error) {
	if err := u.refuseChange("run"); err != nil {
		return nil, err
	}
	return rollout.ActionTargets(&u.w.state, u.w.spec, req)
}
