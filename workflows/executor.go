package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The executor runs the planner's passes (workflows/plan): deploys, resizes and applies
// (removal, restart starts, setup), and deletes (the removal toward the empty spec). It is
// the one level loop: each step is planned when it is taken, and run as a child workflow
// per role through runLevel.

// passHooks let an operation act around a pass's steps. before runs ahead of each step's
// planning (writing the cluster's files, say) and after once the step ran; either returns
// false to end the pass. Either may be nil.
type passHooks struct {
	before func(step plan.Step) bool
	after  func(step plan.Step) bool
	// restarted names the restarted hosts, for a restart pass.
	restarted []string
}

// runPass takes the pass's steps in order until one ends it, the context ends, or none is
// left.
func (w *clusterWorkflow) runPass(ctx workflow.Context, desired spec.Cluster, pass plan.Pass, hooks passHooks) {
	for _, step := range pass.Steps {
		if ctx.Err() != nil || hooks.before != nil && !hooks.before(step) {
			return
		}
		forget, work := step.Work(desired, w.state.Roles, hooks.restarted)
		for _, name := range forget {
			_, m := w.findMember(name)
			m.State, m.Since = MemberDeleted, workflow.Now(ctx) // never created: nothing to tear down
		}
		switch step.Op {
		case OpTeardown:
			work = w.dropUnreachable(work, workflow.Now(ctx))
		case OpConfigure:
			w.markSetUpNow(work)
		}
		w.runner.runLevel(ctx, step.Op, work)
		switch step.Op {
		case OpTeardown:
			for _, rw := range work {
				w.noteRemoved(rw.Role, rw.Members)
			}
		case OpStart:
			if ctx.Err() != nil {
				return
			}
			w.health.failedStartsAreDown(ctx, work)
		}
		if hooks.after != nil && !hooks.after(step) {
			return
		}
	}
}
