package role

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

// Runner runs role operations as child workflows, a child per role or per batch of a wide
// role, and applies what they report to the cluster's members. It is the only code that
// starts role children.
type Runner struct {
	// Bounded keeps every payload bounded (change.BoundedPayloads).
	Bounded bool
	// active maps a role to the operation acting on its members now.
	active map[string]*Operation
	// childStarts bounds the child workflows started in one workflow task.
	childStarts startGate
}

// Cluster is what the runner needs of the cluster whose roles it runs: its state, where
// it applies what children report, its roles' specs, and a way to show a change.
type Cluster interface {
	State() *workflows.ClusterState
	// RoleSpec is a role of the desired spec, or one an apply removed whose members are
	// not gone yet.
	RoleSpec(name string) (spec.Role, bool)
	Touch(ctx workflow.Context)
}

// NewRunner is a runner with no operation in progress.
func NewRunner(bounded bool) *Runner {
	return &Runner{Bounded: bounded, active: map[string]*Operation{}}
}

// RunLevel runs op on the roles of one dependency level at once, a child workflow per
// role, and applies each child's final member states once all have ended. It is the one
// way members are acted on: configure, teardown, addnodes and delnodes.
func (r *Runner) RunLevel(ctx workflow.Context, c Cluster, op plan.RoleOperation, work []plan.RoleWork) {
	ops := make([]*Operation, len(work))
	for i, rw := range work {
		ops[i] = r.startRole(ctx, c, op, rw)
	}
	c.Touch(ctx)
	for i, o := range ops {
		r.finishRole(ctx, c, work[i].Role, o)
	}
}

// startRole runs one role operation as child workflows, so that per-member events land in
// the children's histories rather than the cluster's: one child for a role of up to
// roleBatchSize members, and batches of that size for a wider one. A notification's work
// names the notice (or, in runs from before notices, the nodes) its members are told.
func (r *Runner) startRole(ctx workflow.Context, c Cluster, op plan.RoleOperation, rw plan.RoleWork) *Operation {
	role := rw.Role
	def, ok := c.RoleSpec(role)
	if !ok {
		def = spec.Role{Name: role} // a rogue's unknown role: no script, only removal
	}
	step := fmt.Sprintf("%s-%d", op, c.State().Operations)
	switch {
	case rw.Notice != nil:
		step += "-" + rw.Notice.Role // a pass may notify a role about several roles' members
	case rw.Nodes != nil:
		step += "-" + rw.Nodes.Role
	case rw.Batch != "":
		step += "-" + rw.Batch
	}
	id := fmt.Sprintf("%s/%s/%s", workflows.ClusterWorkflowID(c.State().Name), step, role)
	in := workflows.RoleInput{Cluster: c.State().Name, Home: c.State().Home, Operation: op, Role: def, Members: rw.Members, Nodes: rw.Nodes, MemberNodes: rw.MemberNodes, Notice: rw.Notice, Revision: c.State().Revision, Action: rw.Action}
	if rw.MaxInFlight > 0 {
		in.Role.MaxInFlight = rw.MaxInFlight
	}
	if r.Bounded {
		// The env travels once per host with the files; the members only as far as a child
		// needs them.
		in.EnvHash, in.Role.Env = spec.EnvHash(def.Env), nil
		in.Members = make([]plan.Member, len(rw.Members))
		for i, m := range rw.Members {
			in.Members[i] = m.ForChild()
		}
	}
	active := &Operation{op: op, members: make([]string, len(rw.Members))}
	for i, m := range rw.Members {
		active.members[i] = m.Name
	}
	r.active[role] = active
	start := func(ctx workflow.Context, b *roleBatch) {
		ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: b.id,
			// A cluster workflow that goes away stops its roles' scripts rather than orphaning them.
			ParentClosePolicy:   enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			WaitForCancellation: true,
			StaticSummary:       fmt.Sprintf("%s %s/%s: %d %s%s", op, c.State().Name, role, len(b.in.Members), workflows.Plural(len(b.in.Members), "member"), batchOf(b.id, id)),
			StaticDetails:       roleDetails(op, def, b.in.Members, b.in.Nodes, b.in.Notice),
		})
		if r.Bounded {
			r.childStarts.admit(ctx, workflows.PayloadSize(b.in))
		}
		b.future = workflow.ExecuteChildWorkflow(ctx, workflows.RoleWorkflowName, b.in)
		if r.Bounded {
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
	workflow.Go(ctx, func(ctx workflow.Context) { r.runBatches(ctx, c, role, active, concurrent, start) })
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
func (r *Runner) finishRole(ctx workflow.Context, c Cluster, role string, op *Operation) {
	if len(op.batches) > 1 {
		// runBatches applies each batch as it ends; waiting must outlive a cancel, which
		// running batches answer with their members' final states.
		waitCtx, _ := workflow.NewDisconnectedContext(ctx)
		_ = workflow.Await(waitCtx, func() bool { return op.ended() })
		delete(r.active, role)
		c.Touch(ctx)
		return
	}
	var res workflows.RoleResult
	err := op.batches[0].future.Get(ctx, &res)
	op.batches[0].done = true
	delete(r.active, role)
	if err != nil {
		// The role workflow reports member failures in its result; an error here means the
		// child itself broke (terminated, timed out), so mark what it was doing.
		r.markUnfinished(ctx, c, role, op.op, op.batches[0].in.Members, err)
		return
	}
	ApplyReport(c.State(), role, res.Members)
	c.Touch(ctx)
}

// markUnfinished puts the members of a batch caught mid-operation into config_error. A
// notification that ended without a result may not have run: its ready members are put in
// config_error too, since nothing may be taken for told that was not; and so are members
// of a configure whose child could not even start (its input refused, say), which would
// otherwise stay pending with no word of why.
func (r *Runner) markUnfinished(ctx workflow.Context, c Cluster, role string, op plan.RoleOperation, members []plan.Member, err error) {
	rs := c.State().Role(role)
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
		case r.Bounded && op == plan.OpConfigure && current.State == plan.MemberPending && !flow.IsCanceled(err):
			current.State, current.Event, current.Since = plan.MemberConfigError, spec.EventConfigure, workflow.Now(ctx)
			current.Detail = why
		case r.Bounded && notifying && current.State == plan.MemberReady:
			current.State, current.Event, current.Since = plan.MemberConfigError, spec.Event(op), workflow.Now(ctx)
			current.Detail = spec.Clip(fmt.Sprintf("%s: %s", op, why), workflows.MaxDetail)
		}
	}
	c.Touch(ctx)
}

// StopUnwanted tells role children still configuring members that are no longer wanted to
// stop them, killing their scripts, rather than finish a setup that would be torn down:
// desired is the spec that no longer wants them.
func (r *Runner) StopUnwanted(ctx workflow.Context, c Cluster, desired spec.Cluster) {
	configuring := map[string][]string{}
	for _, role := range slices.Sorted(maps.Keys(r.active)) {
		if op := r.active[role]; op.op == plan.OpConfigure {
			configuring[role] = op.members
		}
	}
	for _, rw := range plan.Stops(desired, c.State().Roles, configuring) {
		rs := c.State().Role(rw.Role)
		leaving := map[string]bool{}
		for _, m := range rw.Members {
			rs.Member(m.Name).Leaving = true
			leaving[m.Name] = true
		}
		r.StopInOperation(ctx, rw.Role, leaving, false)
	}
}

// StopInOperation stops the members of a role's operation in progress: a batch that has
// not started drops them, and a running one is told to stop them (their scripts killed, or
// never started).
func (r *Runner) StopInOperation(ctx workflow.Context, role string, stop map[string]bool, hostLost bool) {
	op := r.active[role]
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

func (r *Runner) ApplyProgress(ctx workflow.Context, c Cluster, p workflows.RoleProgress) {
	op := r.active[p.Role]
	if op == nil {
		return // the operation already finished and its result is applied
	}
	if b := op.batch(p.Operation); b == nil || b.done {
		return
	}
	r.haltOnFailure(ctx, op, ApplyReport(c.State(), p.Role, p.Members))
	c.Touch(ctx)
}

// Hold stops the configure children in progress starting further members; the
// members running finish. converge then stops at its next step and marks the operation
// held, to run again once maintenance ends.
func (r *Runner) Hold(ctx workflow.Context) {
	for _, role := range slices.Sorted(maps.Keys(r.active)) {
		op := r.active[role]
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

// heldForMaintenance is why members and batches a maintenance stopped did not start.
const heldForMaintenance = "held for maintenance"

// ActsOn reports whether an operation in progress acts on the member.
func (r *Runner) ActsOn(role, member string) bool {
	op := r.active[role]
	return op != nil && slices.Contains(op.members, member)
}

// Configuring is the configure operation in progress on a role, or nil.
func (r *Runner) Configuring(role string) *Operation {
	if op := r.active[role]; op != nil && op.op == plan.OpConfigure {
		return op
	}
	return nil
}

// ConfiguringRoles are the roles a configure operation is in progress on, sorted.
func (r *Runner) ConfiguringRoles() []string {
	var roles []string
	for _, role := range slices.Sorted(maps.Keys(r.active)) {
		if r.Configuring(role) != nil {
			roles = append(roles, role)
		}
	}
	return roles
}

// Room is how many more members op's last batch takes: in runs that bound payloads
// (Bounded), no more than a batch holds; the others wait for the next pass.
func (r *Runner) Room(op *Operation) int {
	last := op.batches[len(op.batches)-1]
	return max(roleBatchSize-len(last.in.Members), 0)
}

// InProgress reports whether op is still the role's operation in progress.
func (r *Runner) InProgress(role string, op *Operation) bool { return r.active[role] == op }

// Grow hands members added to a role while op, in progress, configures it to op's last
// batch, which starts with them, or, running, queues them: either way they count as its
// members, so that a later shrink stops them there. It reports false when the last batch
// ended meanwhile: the operation's pass sets them up.
func (r *Runner) Grow(ctx workflow.Context, op *Operation, added []plan.Member) bool {
	for _, m := range added {
		op.members = append(op.members, m.Name)
	}
	last := op.batches[len(op.batches)-1]
	if last.done {
		return false
	}
	last.in.Members = append(last.in.Members, added...)
	if last.future != nil {
		last.future.SignalChildWorkflow(ctx, workflows.AddMembersSignal, workflows.AddMembers{Members: added})
	}
	return true
}
