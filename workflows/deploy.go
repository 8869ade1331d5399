package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// deploy sets roles up level by level: a level starts only once every role before it is
// ready. A failed role stops the deploy, so roles depending on it never start. ctx is
// cancelled when a delete arrives.
func (w *clusterWorkflow) deploy(ctx workflow.Context) {
	w.state.Operations++
	for i, level := range w.state.Levels {
		if ctx.Err() != nil {
			return
		}
		if err := w.writeClusterFiles(ctx, i == 0); err != nil {
			// Cancelled by a delete is not a failure; anything else is.
			if ctx.Err() == nil {
				w.setPhase(ctx, PhaseFailed, "could not write the cluster's files: "+errorMessage(err))
			}
			return
		}
		var roles []*RoleStatus
		var futures []workflow.ChildWorkflowFuture
		for _, name := range level {
			rs := w.state.Role(name)
			if len(rs.Members) == 0 {
				continue // nothing to set up: ready as it is
			}
			roles = append(roles, rs)
			futures = append(futures, w.startRole(ctx, OpConfigure, rs.Name, rs.Members))
		}
		w.touch(ctx)
		var failed []string
		for j, f := range futures {
			w.finishRole(ctx, roles[j].Name, f)
			if n := countState(roles[j].Members, MemberConfigError); n > 0 {
				failed = append(failed, fmt.Sprintf("role %s failed: %d of %d members in config_error", roles[j].Name, n, len(roles[j].Members)))
			}
		}
		if ctx.Err() != nil {
			return
		}
		if len(failed) > 0 {
			w.skipLaterLevels(i, strings.Join(level, ", "))
			w.setPhase(ctx, PhaseFailed, strings.Join(failed, "; "))
			return
		}
	}
	if err := w.writeClusterFiles(ctx, false); err != nil {
		w.logger.Warn("Could not refresh configmeta after deploy", "Error", err)
	}
	ready, total := countMembers(w.state.Roles, MemberReady)
	w.setPhase(ctx, PhaseReady, fmt.Sprintf("%d/%d members ready", ready, total))
}

// startRole runs one role operation as a child workflow, so that per-member events land in
// the child's history rather than the cluster's.
func (w *clusterWorkflow) startRole(ctx workflow.Context, op RoleOperation, role string, members []Member) workflow.ChildWorkflowFuture {
	r, _ := w.spec.Role(role)
	id := fmt.Sprintf("%s/%s-%d/%s", ClusterWorkflowID(w.state.Name), op, w.state.Operations, role)
	w.activeOps[role] = id
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id,
		// A cluster workflow that goes away stops its roles' scripts rather than orphaning them.
		ParentClosePolicy:   enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		StaticSummary:       fmt.Sprintf("%s %s/%s: %d %s", op, w.state.Name, role, len(members), plural(len(members), "member")),
		StaticDetails:       roleDetails(op, r, members),
	})
	return workflow.ExecuteChildWorkflow(ctx, RoleWorkflowName, RoleInput{
		Cluster: w.state.Name, Operation: op, Role: r, Members: members,
	})
}

// finishRole waits for a role operation and applies its final member states.
func (w *clusterWorkflow) finishRole(ctx workflow.Context, role string, f workflow.ChildWorkflowFuture) {
	var res RoleResult
	err := f.Get(ctx, &res)
	delete(w.activeOps, role)
	if err != nil {
		// The role workflow reports member failures in its result; an error here means the
		// child itself broke (terminated, timed out), so mark what it was doing.
		w.markUnfinished(ctx, role, "role operation ended without a result: "+errorMessage(err))
		return
	}
	w.applyMembers(role, res.Members)
	w.touch(ctx)
}

// markUnfinished puts members caught mid-operation into config_error.
func (w *clusterWorkflow) markUnfinished(ctx workflow.Context, role, why string) {
	rs := w.state.Role(role)
	for i := range rs.Members {
		switch rs.Members[i].State {
		case MemberCreating, MemberConfiguring, MemberDeleting:
			rs.Members[i].State, rs.Members[i].Detail, rs.Members[i].Since = MemberConfigError, why, workflow.Now(ctx)
		}
	}
	w.touch(ctx)
}

// skipLaterLevels says why roles after a failed level never started.
func (w *clusterWorkflow) skipLaterLevels(failedLevel int, failedRoles string) {
	for _, level := range w.state.Levels[failedLevel+1:] {
		for _, name := range level {
			rs := w.state.Role(name)
			for i := range rs.Members {
				rs.Members[i].Detail = "not started: level with " + failedRoles + " failed"
			}
		}
	}
}

// writeClusterFiles refreshes the configmeta members read, and installs the startscripts
// when asked (once per operation, to keep scripts out of every activity input).
func (w *clusterWorkflow) writeClusterFiles(ctx workflow.Context, withScripts bool) error {
	files := backend.ClusterFiles{Cluster: w.state.Name, ConfigMeta: w.configMeta()}
	if withScripts {
		files.Scripts = w.spec.Scripts
	}
	return workflow.ExecuteActivity(withQuickActivity(ctx, "write files of "+w.state.Name), acts.WriteClusterFiles, files).Get(ctx, nil)
}

func (w *clusterWorkflow) configMeta() backend.ConfigMeta {
	meta := backend.ConfigMeta{Cluster: w.state.Name}
	for _, r := range w.state.Roles {
		role := backend.ConfigMetaRole{Name: r.Name, DependsOn: r.DependsOn, Members: []string{}}
		if role.DependsOn == nil {
			role.DependsOn = []string{}
		}
		for _, m := range r.Members {
			if m.State == MemberDeleted {
				continue
			}
			role.Members = append(role.Members, m.Name)
			meta.Members = append(meta.Members, backend.ConfigMetaNode{Name: m.Name, Role: r.Name, Ordinal: m.Ordinal, State: string(m.State)})
		}
		meta.Roles = append(meta.Roles, role)
	}
	return meta
}

// details is the workflow's current details: what is happening right now, in one line.
func (w *clusterWorkflow) details() string {
	switch w.state.Phase {
	case PhaseDeploying:
		for i, level := range w.state.Levels {
			var parts []string
			done := true
			for _, name := range level {
				rs := w.state.Role(name)
				ready := CountReady(rs.Members)
				done = done && ready == len(rs.Members)
				parts = append(parts, fmt.Sprintf("%s %d/%d ready", name, ready, len(rs.Members)))
			}
			if !done {
				return fmt.Sprintf("level %d/%d: %s", i+1, len(w.state.Levels), strings.Join(parts, ", "))
			}
		}
	case PhaseDeleting:
		deleted, total := countMembers(w.state.Roles, MemberDeleted)
		return fmt.Sprintf("deleting: %d/%d members removed", deleted, total)
	}
	if w.state.Message == "" {
		return string(w.state.Phase)
	}
	return fmt.Sprintf("%s: %s", w.state.Phase, w.state.Message)
}

func countState(members []Member, state MemberState) int {
	n := 0
	for _, m := range members {
		if m.State == state {
			n++
		}
	}
	return n
}

func errorMessage(err error) string {
	return rootCause(err).Error()
}
