package cluster

// How one step of a pass runs: its work planned as it is taken (members never created
// forgotten, members on lost hosts dropped, why each leaves), run through the role runner,
// and what it did noted (members removed, failed teardowns).

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// runPass takes the pass's steps in order until the context ends or none is left. desired
// is read at each step: a change that arrives midway is planned for. restarted names the
// restarted hosts, for a start pass.
func (e *executor) runPass(ctx workflow.Context, desired *spec.Cluster, pass plan.Pass, restarted []string) {
	for _, step := range pass.Steps {
		if ctx.Err() != nil {
			return
		}
		e.RunStep(ctx, step, e.StepWork(ctx, *desired, step, restarted))
	}
}

// StepWork plans a step's work as it is taken, from the members as they are then: members
// never created are forgotten, and what the work's members are told is filled in.
func (e *executor) StepWork(ctx workflow.Context, desired spec.Cluster, step plan.Step, restarted []string) []plan.RoleWork {
	forget, work := step.Work(desired, e.w.state.Roles, restarted)
	for _, name := range forget {
		_, m := e.w.state.FindMember(name)
		m.State, m.Since = plan.MemberDeleted, workflow.Now(ctx) // never created: nothing to tear down
	}
	switch step.Op {
	case plan.OpTeardown, plan.OpDecommission:
		work = e.dropUnreachable(work, workflow.Now(ctx))
		if e.w.lifecycle {
			e.sayWhyRemoved(work)
		}
	case plan.OpConfigure:
		e.markSetUpNow(work)
	}
	return work
}

// RunStep runs a step's work through the role runner, a child workflow per role, and
// notes what it did.
func (e *executor) RunStep(ctx workflow.Context, step plan.Step, work []plan.RoleWork) {
	e.w.runner.RunLevel(ctx, e.w, step.Op, work)
	switch step.Op {
	case plan.OpTeardown:
		for _, rw := range work {
			e.w.noteRemoved(rw.Role, rw.Members)
			if e.w.lifecycle {
				e.noteFailedTeardowns(rw, workflow.Now(ctx))
			}
		}
	case plan.OpStart:
		if ctx.Err() == nil {
			e.w.health.FailedStartsAreDown(ctx, e.w, work)
		}
	}
}

// sayWhyRemoved tells each member of a teardown why it leaves: its teardown then knows
// whether its data has anywhere to go.
func (e *executor) sayWhyRemoved(work []plan.RoleWork) {
	for _, rw := range work {
		for i := range rw.Members {
			m := &rw.Members[i]
			switch {
			case e.w.state.Phase == workflows.PhaseDeleting:
				m.RemovedFor = "delete"
			case m.State == plan.MemberRogue:
				m.RemovedFor = "orphan"
			case m.State == plan.MemberReplacing && m.ReplacedOn() == plan.HealthDrain:
				m.RemovedFor = "drain"
			case m.State == plan.MemberReplacing:
				m.RemovedFor = "replace"
			default:
				m.RemovedFor = "shrink"
			}
		}
	}
}

// markSetUpNow records that the members about to be set up configure with the configmeta
// just written, and so know the members it lists; a member placed afresh is this
// operation's to set up now.
func (e *executor) markSetUpNow(work []plan.RoleWork) {
	for _, rw := range work {
		rs := e.w.state.Role(rw.Role)
		for i := range rw.Members {
			live := rs.Member(rw.Members[i].Name)
			live.KnowsUpTo, live.Moved = e.w.state.ConfigMetaVersion, false
			rw.Members[i].KnowsUpTo, rw.Members[i].Moved = e.w.state.ConfigMetaVersion, false
		}
	}
}

// keptFailedTeardowns bounds the failed teardowns the state keeps (each with up to 8 KiB
// of output tails).
const keptFailedTeardowns = 10

// noteFailedTeardowns keeps the members of a teardown whose script failed: they are
// removed all the same, and these are what status and --wait show of them.
func (e *executor) noteFailedTeardowns(rw plan.RoleWork, now time.Time) {
	rs := e.w.state.Role(rw.Role)
	for _, m := range rw.Members {
		live := rs.Member(m.Name)
		if live == nil || live.State != plan.MemberDeleted || !strings.HasPrefix(live.Detail, workflows.TeardownFailed) {
			continue
		}
		e.w.state.FailedTeardowns = append(e.w.state.FailedTeardowns, workflows.FailedTeardown{
			Member: m.Name, Role: rw.Role, Host: m.Host, Reason: m.RemovedFor, Generation: e.w.state.Generation, At: now,
			Detail: live.Detail, StdoutTail: live.StdoutTail, StderrTail: live.StderrTail,
		})
	}
	if extra := len(e.w.state.FailedTeardowns) - keptFailedTeardowns; extra > 0 {
		e.w.state.FailedTeardowns = slices.Delete(e.w.state.FailedTeardowns, 0, extra)
	}
}

// noteRemoved queues a delnodes announcement for the torn-down members that are now gone.
func (c *cluster) noteRemoved(role string, tornDown []plan.Member) {
	rs := c.state.Role(role)
	for _, m := range tornDown {
		if now := rs.Member(m.Name); now != nil && now.State == plan.MemberDeleted {
			c.removed = append(c.removed, workflows.RemovedNode{Role: role, Name: m.Name, ListedIn: now.ListedIn, Announced: now.Announced, UnlistedFrom: now.UnlistedFrom})
		}
	}
}

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
