package role

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Workflow, the role child, runs one operation (configure or teardown) over members of one role. Its
// result holds every member's final state; while it runs it reports changes to its parent
// cluster workflow, coalesced so the parent's history stays small.
func Workflow(ctx workflow.Context, in workflows.RoleInput) (workflows.RoleResult, error) {
	r := newRoleWorkflow(ctx, in)
	r.setup(ctx)
	return r.run(ctx)
}

type roleWorkflow struct {
	in      workflows.RoleInput
	members []plan.Member
	// changed lists members changed since the last progress report, by index.
	changed []int
	done    bool
	started time.Time
	// unwanted marks members the cluster no longer wants; cancelMember stops one that runs.
	unwanted     map[string]bool
	cancelMember map[int]workflow.CancelFunc
	// queueClosed is set once configureAll takes no more members; the cluster sets up
	// members it adds after that itself.
	queueClosed bool
	// halted says why no further member starts: another batch of the role failed.
	halted string
	// failureToReport is set by the first failed configure, which the cluster hears of at
	// once, as it halts the role's other batches; failureReported once that report went.
	failureToReport, failureReported bool
	// tailed counts the failed members whose output tails are kept.
	tailed int
	// hostLost marks members stopped because their host is lost: nothing goes there.
	hostLost map[string]bool
}

func newRoleWorkflow(ctx workflow.Context, in workflows.RoleInput) *roleWorkflow {
	return &roleWorkflow{
		in: in, members: append([]plan.Member(nil), in.Members...), started: workflow.Now(ctx),
		unwanted: map[string]bool{}, cancelMember: map[int]workflow.CancelFunc{}, hostLost: map[string]bool{},
	}
}

func (r *roleWorkflow) setup(ctx workflow.Context) {
	if parent := workflow.GetInfo(ctx).ParentWorkflowExecution; parent != nil {
		workflow.Go(ctx, func(ctx workflow.Context) { r.reportProgress(ctx, parent.ID) })
	}
	stops := workflow.GetSignalChannel(ctx, workflows.StopMembersSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var stop workflows.StopMembers
			if !stops.Receive(ctx, &stop) {
				return
			}
			if stop.Halt != "" && r.halted == "" {
				r.halted = stop.Halt
			}
			if stop.HostLost {
				for _, name := range stop.Members {
					r.hostLost[name] = true
				}
			}
			r.stop(stop.Members)
		}
	})
	adds := workflow.GetSignalChannel(ctx, workflows.AddMembersSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var add workflows.AddMembers
			adds.Receive(ctx, &add)
			if r.in.Operation == plan.OpConfigure && !r.queueClosed {
				r.members = append(r.members, add.Members...)
			}
		}
	})
}

// stop drops members the cluster no longer wants: those not started never start, and
// those running are cancelled, which kills their scripts.
func (r *roleWorkflow) stop(names []string) {
	for _, name := range names {
		r.unwanted[name] = true
	}
	for _, i := range slices.Sorted(maps.Keys(r.cancelMember)) {
		if r.unwanted[r.members[i].Name] {
			r.cancelMember[i]()
		}
	}
}

func (r *roleWorkflow) run(ctx workflow.Context) (workflows.RoleResult, error) {
	switch r.in.Operation {
	case plan.OpConfigure:
		r.configureAll(ctx)
	case plan.OpTeardown:
		r.teardownAll(ctx)
	case plan.OpAddNodes, plan.OpDelNodes, plan.OpRemoving, plan.OpStart:
		r.notifyAll(ctx)
	case plan.OpUpgrade, plan.OpRestart:
		r.updateAll(ctx)
	case plan.OpAction:
		r.actionAll(ctx)
	case plan.OpDecommission:
		r.decommissionAll(ctx)
	default:
		return workflows.RoleResult{}, fmt.Errorf("unknown role operation %q", r.in.Operation)
	}
	r.done = true
	out := make([]plan.Member, len(r.members))
	for i, m := range r.members {
		out[i] = m.Outcome()
	}
	return workflows.RoleResult{Members: out}, nil
}

// updateAll runs a rollout's batch, its members at once: upgrade moves each to the input's
// revision, restart restarts it. A member counts as moved once its upgrade ran, whatever
// the outcome: a failed upgrade may have changed it, and an undo runs upgrade on it again.
func (r *roleWorkflow) updateAll(ctx workflow.Context) {
	event := spec.Event(r.in.Operation)
	r.forEachMember(ctx, r.limit(), func(ctx workflow.Context, i int) {
		what := string(event)
		if event == spec.EventUpgrade {
			what = fmt.Sprintf("upgrade from revision %d to %d", max(r.members[i].Revision, 1), r.in.Revision)
		}
		r.set(ctx, i, plan.MemberReady, event, "running "+what)
		res, err := r.runScript(ctx, i, event)
		if event == spec.EventUpgrade {
			r.members[i].Revision = r.in.Revision
		}
		if err != nil {
			r.fail(ctx, i, what, err)
			return
		}
		r.set(ctx, i, plan.MemberReady, event, fmt.Sprintf("%s done in %s", what, res.Duration.Round(time.Millisecond)))
	})
}

// actionAll runs the input's action on every member, at most the role's share of
// maxInFlight (the action's --parallel) at once. Each member's result is its detail and
// output tails: a failure leaves it in config_error for the cluster to report.
func (r *roleWorkflow) actionAll(ctx workflow.Context) {
	event := spec.Event(r.in.Action.Name)
	r.forEachMember(ctx, r.limit(), func(ctx workflow.Context, i int) {
		what := "action " + r.in.Action.Name
		r.set(ctx, i, plan.MemberReady, event, "running "+what)
		res, err := r.runScript(ctx, i, event)
		if err != nil {
			r.fail(ctx, i, what, err)
			return
		}
		r.set(ctx, i, plan.MemberReady, event, fmt.Sprintf("%s: exit 0 in %s", what, res.Duration.Round(time.Millisecond)))
		if r.tailed < tailsPerChild {
			r.tailed++
			r.members[i].StdoutTail, r.members[i].StderrTail = res.StdoutTail, res.StderrTail
		}
	})
}

// notifyAll runs addnodes, delnodes or start on every member at once. A member whose run
// fails goes to config_error with its output; the others carry on.
func (r *roleWorkflow) notifyAll(ctx workflow.Context) {
	event := spec.Event(r.in.Operation)
	r.forEachMember(ctx, r.in.MaxInFlight, func(ctx workflow.Context, i int) {
		what := string(event)
		switch {
		case r.in.Notice != nil:
			what = fmt.Sprintf("%s (role %s, notice %d)", event, r.in.Notice.Role, r.in.Notice.ID)
		case r.in.Nodes != nil:
			what = fmt.Sprintf("%s (%s: %s)", event, r.in.Nodes.Role, spec.Some(r.nodesFor(i), detailNames))
		}
		r.set(ctx, i, plan.MemberReady, event, "running "+what)
		res, err := r.runScript(ctx, i, event)
		if err != nil {
			r.fail(ctx, i, string(event), err)
			return
		}
		r.set(ctx, i, plan.MemberReady, event, fmt.Sprintf("%s done in %s", what, res.Duration.Round(time.Millisecond)))
	})
}

// detailNames is how many nodes a notification's detail names: a detail is kept for every
// member, and a thousand joiners named in each of ten thousand members' details made the
// cluster's state hundreds of megabytes.
const detailNames = 5

// limit is how many members may run at once (0: all): the child's share of the role's
// maxInFlight when the role runs as batches, else the role's own.
func (r *roleWorkflow) limit() int {
	if r.in.MaxInFlight > 0 {
		return r.in.MaxInFlight
	}
	return r.in.Role.MaxInFlight
}

// forEachMember runs do for every member in parallel. Teardowns and notifications ran
// all at once before roles ran as batches; a batch, given a share of maxInFlight, keeps
// to it, so that a wide role never runs more scripts at once than it allows.
func (r *roleWorkflow) forEachMember(ctx workflow.Context, limit int, do func(workflow.Context, int)) {
	running := flow.Slots{Limit: limit} // 0: all at once, as before batches
	wg := workflow.NewWaitGroup(ctx)
	for i := range r.members {
		_ = running.Wait(ctx, 1, nil)
		running.Take(1)
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			do(ctx, i)
			running.Give(1)
		})
	}
	wg.Wait(ctx)
}

// nodesFor is what member i is told about in a notification.
func (r *roleWorkflow) nodesFor(i int) []string {
	if i < len(r.in.MemberNodes) {
		return r.in.MemberNodes[i]
	}
	return r.in.Nodes.Nodes
}

// fail puts a member in config_error, keeping the script's output tails when there are any,
// for the first few failures: a batch of failures each with kilobytes of output would make
// the child's result and the cluster's state too large to carry. The rest are in `logs`.
func (r *roleWorkflow) fail(ctx workflow.Context, i int, step string, err error) {
	detail := step + ": " + flow.ErrorMessage(err)
	if flow.IsCanceled(err) {
		detail = "canceled"
	}
	r.set(ctx, i, plan.MemberConfigError, r.members[i].Event, detail)
	if stdout, stderr := flow.ScriptTails(err); stdout != "" || stderr != "" {
		if r.tailed < tailsPerChild {
			r.tailed++
			r.members[i].StdoutTail, r.members[i].StderrTail = stdout, stderr
		} else {
			r.members[i].Detail = spec.Clip(detail, workflows.MaxDetail-len(workflows.SeeLogs)) + workflows.SeeLogs
		}
	}
	if step == "configure" && !flow.IsCanceled(err) && !r.failureReported {
		r.failureToReport = true
	}
}

// tailsPerChild bounds the failed members a child reports output tails of (a tail is up to
// 4 KiB a stream).
const tailsPerChild = 10

func (r *roleWorkflow) set(ctx workflow.Context, i int, state plan.MemberState, event spec.Event, detail string) {
	m := &r.members[i]
	m.State, m.Event, m.Detail, m.Since = state, event, spec.Clip(detail, workflows.MaxDetail), workflow.Now(ctx)
	m.StdoutTail, m.StderrTail = "", ""
	r.changed = append(r.changed, i)
}

func (r *roleWorkflow) ref(i int) backend.MemberRef {
	return backend.MemberRef{Cluster: r.in.Cluster, Home: r.in.Home, Role: r.in.Role.Name, Name: r.members[i].Name}
}

// reportProgress sends member changes to the parent. It waits a moment after a change so
// that a burst of changes becomes one signal, and a role that finishes quickly sends none:
// its result carries everything. The first failed configure does not wait.
func (r *roleWorkflow) reportProgress(ctx workflow.Context, parentID string) {
	prompt := workflow.GetVersion(ctx, change.PromptFailureReports, workflow.DefaultVersion, 1) >= 1
	for {
		if err := workflow.Await(ctx, func() bool { return len(r.changed) > 0 || r.done }); err != nil || r.done {
			return
		}
		if prompt {
			if _, err := workflow.AwaitWithTimeout(ctx, r.reportInterval(ctx), func() bool { return r.failureToReport || r.done }); err != nil || r.done {
				return
			}
			if r.failureToReport {
				r.failureToReport, r.failureReported = false, true // this report carries it
			}
		} else if err := workflow.Sleep(ctx, r.reportInterval(ctx)); err != nil || r.done {
			return
		}
		progress := workflows.RoleProgress{Role: r.in.Role.Name, Operation: workflow.GetInfo(ctx).WorkflowExecution.ID}
		seen := map[int]bool{}
		for _, i := range r.changed {
			if !seen[i] {
				seen[i] = true
				progress.Members = append(progress.Members, r.members[i].Outcome())
			}
		}
		r.changed = nil
		_ = workflow.SignalExternalWorkflow(ctx, parentID, "", workflows.RoleProgressSignal, progress).Get(ctx, nil)
	}
}

// reportInterval grows with the operation's age: fresh detail early on, and a long
// operation's history still grows only slowly.
func (r *roleWorkflow) reportInterval(ctx workflow.Context) time.Duration {
	return min(max(workflow.Now(ctx).Sub(r.started)/20, time.Second), 10*time.Second)
}
