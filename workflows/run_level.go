package workflows

import (
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// runLevel runs op on the roles of one dependency level at once, a child workflow per
// role, and applies each child's final member states once all have ended. It is the one
// way members are acted on: configure, teardown, addnodes and delnodes.
func (w *clusterWorkflow) runLevel(ctx workflow.Context, op RoleOperation, work []roleWork) {
	futures := make([]workflow.ChildWorkflowFuture, len(work))
	for i, rw := range work {
		futures[i] = w.startRole(ctx, op, rw.role, rw.members, rw.nodes, rw.memberNodes)
	}
	w.touch(ctx)
	for i, f := range futures {
		w.finishRole(ctx, work[i].role, f)
	}
}

// startRole runs one role operation as a child workflow, so that per-member events land in
// the child's history rather than the cluster's. For a notification, nodes names the
// members joining or leaving, and memberNodes those each member is told about.
func (w *clusterWorkflow) startRole(ctx workflow.Context, op RoleOperation, role string, members []Member, nodes *NodeGroup, memberNodes [][]string) workflow.ChildWorkflowFuture {
	r, ok := w.roleSpec(role)
	if !ok {
		r = spec.Role{Name: role} // a rogue's unknown role: no script, only removal
	}
	step := fmt.Sprintf("%s-%d", op, w.state.Operations)
	if nodes != nil {
		step += "-" + nodes.Role // a pass may notify a role about several roles' members
	}
	id := fmt.Sprintf("%s/%s/%s", ClusterWorkflowID(w.state.Name), step, role)
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id,
		// A cluster workflow that goes away stops its roles' scripts rather than orphaning them.
		ParentClosePolicy:   enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		StaticSummary:       fmt.Sprintf("%s %s/%s: %d %s", op, w.state.Name, role, len(members), plural(len(members), "member")),
		StaticDetails:       roleDetails(op, r, members, nodes),
	})
	f := workflow.ExecuteChildWorkflow(ctx, RoleWorkflowName, RoleInput{
		Cluster: w.state.Name, Operation: op, Role: r, Members: members, Nodes: nodes, MemberNodes: memberNodes,
	})
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	w.activeOps[role] = &activeOp{id: id, op: op, future: f, members: names}
	return f
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
