package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// roleRunner runs role operations as child workflows, a child per role or per batch of a
// wide role, and applies what they report to the cluster's members. It is the only code
// that starts role children; touch shows each change.
type roleRunner struct {
	*cluster
	// childStarts bounds the child workflows started in one workflow task.
	childStarts startGate
	touch       func(workflow.Context)
}

// runLevel runs op on the roles of one dependency level at once, a child workflow per
// role, and applies each child's final member states once all have ended. It is the one
// way members are acted on: configure, teardown, addnodes and delnodes.
func (r *roleRunner) runLevel(ctx workflow.Context, op plan.RoleOperation, work []plan.RoleWork) {
	ops := make([]*activeOp, len(work))
	for i, rw := range work {
		ops[i] = r.startRole(ctx, op, rw)
	}
	r.touch(ctx)
	for i, o := range ops {
		r.finishRole(ctx, work[i].Role, o)
	}
}

// startRole runs one role operation as child workflows, so that per-member events land in
// the children's histories rather than the cluster's: one child for a role of up to
// roleBatchSize members, and batches of that size for a wider one. A notification's work
// names the notice (or, in runs from before notices, the nodes) its members are told.
func (r *roleRunner) startRole(ctx workflow.Context, op plan.RoleOperation, rw plan.RoleWork) *activeOp {
	role := rw.Role
	def, ok := r.roleSpec(role)
	if !ok {
		def = spec.Role{Name: role} // a rogue's unknown role: no script, only removal
	}
	step := fmt.Sprintf("%s-%d", op, r.state.Operations)
	switch {
	case rw.Notice != nil:
		step += "-" + rw.Notice.Role // a pass may notify a role about several roles' members
	case rw.Nodes != nil:
		step += "-" + rw.Nodes.Role
	case rw.Batch != "":
		step += "-" + rw.Batch
	}
	id := fmt.Sprintf("%s/%s/%s", workflows.ClusterWorkflowID(r.state.Name), step, role)
	in := workflows.RoleInput{Cluster: r.state.Name, Home: r.state.Home, Operation: op, Role: def, Members: rw.Members, Nodes: rw.Nodes, MemberNodes: rw.MemberNodes, Notice: rw.Notice, Revision: r.state.Revision, Action: rw.Action}
	if rw.MaxInFlight > 0 {
		in.Role.MaxInFlight = rw.MaxInFlight
	}
	if r.bounded {
		// The env travels once per host with the files; the members only as far as a child
		// needs them.
		in.EnvHash, in.Role.Env = spec.EnvHash(def.Env), nil
		in.Members = make([]plan.Member, len(rw.Members))
		for i, m := range rw.Members {
			in.Members[i] = m.ForChild()
		}
	}
	active := &activeOp{op: op, members: make([]string, len(rw.Members))}
	for i, m := range rw.Members {
		active.members[i] = m.Name
	}
	r.activeOps[role] = active
	start := func(ctx workflow.Context, b *roleBatch) {
		ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: b.id,
			// A cluster workflow that goes away stops its roles' scripts rather than orphaning them.
			ParentClosePolicy:   enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			WaitForCancellation: true,
			StaticSummary:       fmt.Sprintf("%s %s/%s: %d %s%s", op, r.state.Name, role, len(b.in.Members), workflows.Plural(len(b.in.Members), "member"), batchOf(b.id, id)),
			StaticDetails:       roleDetails(op, def, b.in.Members, b.in.Nodes, b.in.Notice),
		})
		if r.bounded {
			r.childStarts.admit(ctx, workflows.PayloadSize(b.in))
		}
		b.future = workflow.ExecuteChildWorkflow(ctx, workflows.RoleWorkflowName, b.in)
		if r.bounded {
			r.childStarts.started(b.future)
		}
	}
	if len(rw.Members) <= roleBatchSize || workflow.GetVersion(ctx, change.RoleBatches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		active.batches = []*roleBatch{{id: id, in: in}}
		start(ctx, active.batches[0])
		return active
	}
	batches, concurrent := splitBatches(in, id)
	active.batches = batches
	workflow.Go(ctx, func(ctx workflow.Context) { r.runBatches(ctx, role, active, concurrent, start) })
	return active
}

// startGate bounds the child workflows a cluster starts in one workflow task. Their inputs
// all ride in the task's completion, which Temporal refuses past 4 MiB: a wide level (or
// a role of many batches with no maxInFlight) would otherwise start them all at once.
// Past the bounds, the next start waits until the children already started have
// started, which their start events mark in a later task.
type startGate struct {
	pending []workflow.ChildWorkflowFuture
	bytes   int
	waiting bool
}

// Bounds of one task's child starts: a batch's input is at most roleBatchSize members of a
// few hundred bytes each, so both hold far under Temporal's 4 MiB.
const (
	startsPerTask     = 16
	startBytesPerTask = 1 << 20
)

// admit waits, when a start of size more bytes would pass the bounds, until the children
// started so far have started.
func (g *startGate) admit(ctx workflow.Context, size int) {
	for len(g.pending) > 0 && (len(g.pending) >= startsPerTask || g.bytes+size > startBytesPerTask) {
		if g.waiting {
			if err := workflow.Await(ctx, func() bool { return !g.waiting }); err != nil {
				return
			}
			continue
		}
		g.waiting = true
		for _, f := range g.pending {
			_ = f.GetChildWorkflowExecution().Get(ctx, nil)
		}
		g.pending, g.bytes, g.waiting = nil, 0, false
	}
	g.bytes += size
}

func (g *startGate) started(f workflow.ChildWorkflowFuture) { g.pending = append(g.pending, f) }

// finishRole waits for a role operation and applies its final member states.
func (r *roleRunner) finishRole(ctx workflow.Context, role string, op *activeOp) {
	if len(op.batches) > 1 {
		// runBatches applies each batch as it ends; waiting must outlive a cancel, which
		// running batches answer with their members' final states.
		waitCtx, _ := workflow.NewDisconnectedContext(ctx)
		_ = workflow.Await(waitCtx, func() bool { return op.ended() })
		delete(r.activeOps, role)
		r.touch(ctx)
		return
	}
	var res workflows.RoleResult
	err := op.batches[0].future.Get(ctx, &res)
	op.batches[0].done = true
	delete(r.activeOps, role)
	if err != nil {
		// The role workflow reports member failures in its result; an error here means the
		// child itself broke (terminated, timed out), so mark what it was doing.
		r.markUnfinishedMembers(ctx, role, op.op, op.batches[0].in.Members, err)
		return
	}
	r.applyMembers(role, res.Members)
	r.touch(ctx)
}

// markUnfinishedMembers puts the members of a batch caught mid-operation into config_error. A
// notification that ended without a result may not have run: its ready members are put in
// config_error too, since nothing may be taken for told that was not; and so are members
// of a configure whose child could not even start (its input refused, say), which would
// otherwise stay pending with no word of why.
func (r *roleRunner) markUnfinishedMembers(ctx workflow.Context, role string, op plan.RoleOperation, members []plan.Member, err error) {
	rs := r.state.Role(role)
	why := spec.Clip("role operation ended without a result: "+flow.ErrorMessage(err), workflows.MaxDetail)
	notifying := spec.Event(op).Notifies() || op == plan.OpStart
	for _, m := range members {
		current := rs.Member(m.Name)
		if current == nil || current.Moved {
			continue
		}
		switch {
		case current.State == plan.MemberCreating, current.State == plan.MemberConfiguring, current.State == plan.MemberDeleting:
			current.State, current.Detail, current.Since = plan.MemberConfigError, why, workflow.Now(ctx)
		case r.bounded && op == plan.OpConfigure && current.State == plan.MemberPending && !flow.IsCanceled(err):
			current.State, current.Event, current.Since = plan.MemberConfigError, spec.EventConfigure, workflow.Now(ctx)
			current.Detail = why
		case r.bounded && notifying && current.State == plan.MemberReady:
			current.State, current.Event, current.Since = plan.MemberConfigError, spec.Event(op), workflow.Now(ctx)
			current.Detail = spec.Clip(fmt.Sprintf("%s: %s", op, why), workflows.MaxDetail)
		}
	}
	r.touch(ctx)
}

// stopUnwanted tells role children still configuring members that are no longer wanted to
// stop them, killing their scripts, rather than finish a setup that would be torn down.
func (r *roleRunner) stopUnwanted(ctx workflow.Context) {
	configuring := map[string][]string{}
	for _, role := range slices.Sorted(maps.Keys(r.activeOps)) {
		if op := r.activeOps[role]; op.op == plan.OpConfigure {
			configuring[role] = op.members
		}
	}
	for _, rw := range plan.Stops(r.spec, r.state.Roles, configuring) {
		rs := r.state.Role(rw.Role)
		leaving := map[string]bool{}
		for _, m := range rw.Members {
			rs.Member(m.Name).Leaving = true
			leaving[m.Name] = true
		}
		r.stopInOperation(ctx, rw.Role, leaving, false)
	}
}

// stopInOperation stops the members of a role's operation in progress: a batch that has
// not started drops them, and a running one is told to stop them (their scripts killed, or
// never started).
func (r *roleRunner) stopInOperation(ctx workflow.Context, role string, stop map[string]bool, hostLost bool) {
	op := r.activeOps[role]
	if op == nil {
		return
	}
	for _, b := range op.batches {
		if b.done {
			continue
		}
		var names []string
		for _, m := range b.in.Members {
			if stop[m.Name] {
				names = append(names, m.Name)
			}
		}
		switch {
		case len(names) == 0:
		case b.future == nil:
			// Not started yet: it sets up only the members still wanted.
			b.in.Members = slices.DeleteFunc(b.in.Members, func(m plan.Member) bool { return stop[m.Name] })
		default:
			b.future.SignalChildWorkflow(ctx, workflows.StopMembersSignal, workflows.StopMembers{Members: names, HostLost: hostLost})
		}
	}
}

func (r *roleRunner) applyProgress(ctx workflow.Context, p workflows.RoleProgress) {
	op := r.activeOps[p.Role]
	if op == nil {
		return // the operation already finished and its result is applied
	}
	if b := op.batch(p.Operation); b == nil || b.done {
		return
	}
	r.haltOnFailure(ctx, op, r.applyMembers(p.Role, p.Members))
	r.touch(ctx)
}

// holdOperation stops the configure children in progress starting further members; the
// members running finish. converge then stops at its next step and marks the operation
// held, to run again once maintenance ends.
func (r *roleRunner) holdOperation(ctx workflow.Context) {
	for _, role := range slices.Sorted(maps.Keys(r.activeOps)) {
		op := r.activeOps[role]
		if op.op != plan.OpConfigure || op.halted != "" {
			continue
		}
		op.halted = heldForMaintenance
		for _, b := range op.running() {
			b.future.SignalChildWorkflow(ctx, workflows.StopMembersSignal, workflows.StopMembers{Halt: heldForMaintenance})
		}
	}
}

// roleDetails is the Markdown the Web UI shows on a role operation's page.
func roleDetails(op plan.RoleOperation, r spec.Role, members []plan.Member, nodes *plan.NodeGroup, notice *plan.NoticeRef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** of role **%s**, startscript `%s`", op, r.Name, r.Startscript)
	if len(r.DependsOn) > 0 {
		fmt.Fprintf(&b, ", after %s", strings.Join(r.DependsOn, ", "))
	}
	switch {
	case notice != nil:
		fmt.Fprintf(&b, "\n\nNodes of role **%s**, as notice %d says; each member's host works out the ones it is told of", notice.Role, notice.ID)
	case nodes != nil:
		fmt.Fprintf(&b, "\n\nNodes of role **%s**: %s", nodes.Role, spec.Some(nodes.Nodes, 20))
	}
	b.WriteString("\n\nMembers:")
	for _, m := range members {
		fmt.Fprintf(&b, " `%s`", m.Name)
	}
	return b.String()
}
