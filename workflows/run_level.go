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
	ops := make([]*activeOp, len(work))
	for i, rw := range work {
		ops[i] = w.startRole(ctx, op, rw.role, rw.members, rw.nodes, rw.memberNodes)
	}
	w.touch(ctx)
	for i, o := range ops {
		w.finishRole(ctx, work[i].role, o)
	}
}

// startRole runs one role operation as child workflows, so that per-member events land in
// the children's histories rather than the cluster's: one child for a role of up to
// roleBatchSize members, and batches of that size for a wider one. For a notification,
// nodes names the members joining or leaving, and memberNodes those each member is told
// about.
func (w *clusterWorkflow) startRole(ctx workflow.Context, op RoleOperation, role string, members []Member, nodes *NodeGroup, memberNodes [][]string) *activeOp {
	r, ok := w.roleSpec(role)
	if !ok {
		r = spec.Role{Name: role} // a rogue's unknown role: no script, only removal
	}
	step := fmt.Sprintf("%s-%d", op, w.state.Operations)
	if nodes != nil {
		step += "-" + nodes.Role // a pass may notify a role about several roles' members
	}
	id := fmt.Sprintf("%s/%s/%s", ClusterWorkflowID(w.state.Name), step, role)
	in := RoleInput{Cluster: w.state.Name, Operation: op, Role: r, Members: members, Nodes: nodes, MemberNodes: memberNodes}
	active := &activeOp{op: op, members: make([]string, len(members))}
	for i, m := range members {
		active.members[i] = m.Name
	}
	w.activeOps[role] = active
	start := func(ctx workflow.Context, b *roleBatch) {
		ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: b.id,
			// A cluster workflow that goes away stops its roles' scripts rather than orphaning them.
			ParentClosePolicy:   enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			WaitForCancellation: true,
			StaticSummary:       fmt.Sprintf("%s %s/%s: %d %s%s", op, w.state.Name, role, len(b.in.Members), plural(len(b.in.Members), "member"), batchOf(b.id, id)),
			StaticDetails:       roleDetails(op, r, b.in.Members, nodes),
		})
		b.future = workflow.ExecuteChildWorkflow(ctx, RoleWorkflowName, b.in)
	}
	if len(members) <= roleBatchSize || workflow.GetVersion(ctx, changeRoleBatches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		active.batches = []*roleBatch{{id: id, in: in}}
		start(ctx, active.batches[0])
		return active
	}
	batches, concurrent := splitBatches(in, id)
	active.batches = batches
	workflow.Go(ctx, func(ctx workflow.Context) { w.runBatches(ctx, role, active, concurrent, start) })
	return active
}

// finishRole waits for a role operation and applies its final member states.
func (w *clusterWorkflow) finishRole(ctx workflow.Context, role string, op *activeOp) {
	if len(op.batches) > 1 {
		// runBatches applies each batch as it ends; waiting must outlive a cancel, which
		// running batches answer with their members' final states.
		waitCtx, _ := workflow.NewDisconnectedContext(ctx)
		_ = workflow.Await(waitCtx, func() bool { return op.ended() })
		delete(w.activeOps, role)
		w.touch(ctx)
		return
	}
	var res RoleResult
	err := op.batches[0].future.Get(ctx, &res)
	op.batches[0].done = true
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
	w.markUnfinishedMembers(ctx, role, w.state.Role(role).Members, why)
}

// markUnfinishedMembers does so for some of the role's members: one batch's.
func (w *clusterWorkflow) markUnfinishedMembers(ctx workflow.Context, role string, members []Member, why string) {
	rs := w.state.Role(role)
	for _, m := range members {
		current := rs.Member(m.Name)
		if current == nil {
			continue
		}
		switch current.State {
		case MemberCreating, MemberConfiguring, MemberDeleting:
			current.State, current.Detail, current.Since = MemberConfigError, why, workflow.Now(ctx)
		}
	}
	w.touch(ctx)
}
