package role

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// How a role child sets its members up: configure, at most maxInFlight at once.

// configureAll sets members up, at most maxInFlight at once, including members the
// cluster adds while it runs. After the first failure no further member starts; those
// already running finish.
func (r *roleWorkflow) configureAll(ctx workflow.Context) {
	running, stopped := flow.Slots{Limit: r.limit()}, ""
	// Waiting must outlive a cancel: running members still need to report how they ended.
	waitCtx, _ := workflow.NewDisconnectedContext(ctx)
	wg := workflow.NewWaitGroup(waitCtx)
	next := 0
	var notStarted []int
	// A context per member lets one member be stopped; it changes the order in which a
	// cancel reaches activities and timers, hence the version check.
	stoppable := workflow.GetVersion(ctx, change.StoppableMembers, workflow.DefaultVersion, 1) >= 1
	for {
		// Wait for a free slot, or for everything started to end with nothing queued.
		err := workflow.Await(ctx, func() bool {
			queued := next < len(r.members)
			return stopped != "" || r.halted != "" || queued && running.Fits(1) || !queued && running.Used == 0
		})
		if err != nil {
			stopped = "canceled"
		} else if stopped == "" {
			stopped = r.halted
		}
		if stopped != "" || next == len(r.members) {
			break
		}
		i := next
		next++
		if r.unwanted[r.members[i].Name] {
			notStarted = append(notStarted, i)
			continue
		}
		running.Take(1)
		wg.Add(1)
		memberCtx := ctx
		if stoppable {
			var cancel workflow.CancelFunc
			memberCtx, cancel = workflow.WithCancel(ctx)
			r.cancelMember[i] = cancel
		}
		workflow.Go(memberCtx, func(ctx workflow.Context) {
			defer wg.Done()
			r.configure(ctx, i)
			running.Give(1)
			delete(r.cancelMember, i)
			if r.members[i].State == plan.MemberConfigError && stopped == "" && ctx.Err() == nil {
				stopped = r.members[i].Name + " failed"
			}
		})
	}
	r.queueClosed = true
	wg.Wait(waitCtx)
	for i := next; i < len(r.members); i++ {
		notStarted = append(notStarted, i)
	}
	for _, i := range notStarted {
		r.members[i].Detail = "not started: " + stopped
		if r.unwanted[r.members[i].Name] {
			r.members[i].Detail = "not started: no longer wanted"
		}
		r.changed = append(r.changed, i)
	}
}

func (r *roleWorkflow) configure(ctx workflow.Context, i int) {
	m := &r.members[i]
	wantsConfigure := r.in.Role.Wants(spec.EventConfigure)
	if !wantsConfigure || workflow.GetVersion(ctx, change.LaunchCreatesSandbox, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		r.set(ctx, i, plan.MemberCreating, "", "")
		if err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, "create "+m.Name), m.Host), flow.ActCreateMember, r.ref(i)).Get(ctx, nil); err != nil {
			r.fail(ctx, i, "create sandbox", err)
			return
		}
	}
	if !wantsConfigure {
		r.set(ctx, i, plan.MemberReady, "", "not subscribed to configure")
		return
	}
	r.set(ctx, i, plan.MemberConfiguring, spec.EventConfigure, "running configure")
	res, err := r.runScript(ctx, i, spec.EventConfigure)
	if err != nil {
		r.fail(ctx, i, "configure", err)
		if flow.RefusedBeforeLaunch(err) && workflow.GetVersion(ctx, change.Lifecycle, workflow.DefaultVersion, 1) >= 1 {
			// Its configure never started: there is nothing for a teardown to undo.
			r.members[i].Event = ""
		}
		return
	}
	m.Revision = r.in.Revision
	r.set(ctx, i, plan.MemberReady, spec.EventConfigure, fmt.Sprintf("configured in %s", res.Duration.Round(time.Millisecond)))
}
