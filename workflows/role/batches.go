package role

import (
	"fmt"
	"slices"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// roleBatchSize bounds the members one role child acts on. A child's history grows about
// three events per member, and its workflow tasks slow down with its width; a slow task
// lets more than Temporal's 100 buffered events pile up, which fails the task and replays
// the child from scratch. Small children keep histories and tasks short at any role size.
const roleBatchSize = 250

// roleBatch is one child workflow's share of a role operation.
type roleBatch struct {
	id string
	in workflows.RoleInput
	// future is nil until the batch starts; done is set once its result is applied.
	future workflow.ChildWorkflowFuture
	done   bool
}

// Operation is one role operation in progress: its batches, started or waiting their turn.
type Operation struct {
	op      plan.RoleOperation
	batches []*roleBatch
	// members names the members the operation acts on, including any added while it runs.
	members []string
	// halted says why batches not started yet never start: a member failed to configure,
	// or the operation was cancelled.
	halted string
}

// batch returns the operation's batch run by the child with this workflow ID, or nil.
func (op *Operation) batch(id string) *roleBatch {
	for _, b := range op.batches {
		if b.id == id {
			return b
		}
	}
	return nil
}

// ended reports whether every batch has ended or will never start.
func (op *Operation) ended() bool {
	for _, b := range op.batches {
		if !b.done {
			return false
		}
	}
	return true
}

// batchOf names a batch in its summary; a role run by one child has none.
func batchOf(id, roleID string) string {
	if id == roleID {
		return ""
	}
	return ", " + id[len(roleID)+1:]
}

// running lists the batches started and not ended.
func (op *Operation) running() []*roleBatch {
	var out []*roleBatch
	for _, b := range op.batches {
		if b.future != nil && !b.done {
			out = append(out, b)
		}
	}
	return out
}

// splitBatches cuts a role operation into children of at most roleBatchSize members, and
// shares the role's maxInFlight between the ones that run at once: as many as the limit
// allows, each with an equal part of it. Members keep their order, so the lowest ordinals
// go first.
func splitBatches(in workflows.RoleInput, baseID string) (batches []*roleBatch, concurrent int) {
	n := (len(in.Members) + roleBatchSize - 1) / roleBatchSize
	for i := range n {
		lo, hi := i*roleBatchSize, min((i+1)*roleBatchSize, len(in.Members))
		part := in
		part.Members = in.Members[lo:hi:hi]
		if len(in.MemberNodes) > 0 {
			part.Nodes, part.MemberNodes = sharedNodes(in.Nodes, in.MemberNodes[lo:min(hi, len(in.MemberNodes))])
		}
		batches = append(batches, &roleBatch{id: fmt.Sprintf("%s/batch-%d-of-%d", baseID, i+1, n), in: part})
	}
	limit := in.Role.MaxInFlight
	if limit <= 0 {
		return batches, n // no limit: all at once, each without one
	}
	concurrent = min(n, limit)
	for i, b := range batches {
		// The first limit%concurrent of each wave take one more.
		b.in.MaxInFlight = limit / concurrent
		if i%concurrent < limit%concurrent {
			b.in.MaxInFlight++
		}
	}
	return batches, concurrent
}

// sharedNodes drops the per-member lists of nodes when every member is told the same
// ones, the common case: a thousand members each told of a thousand joiners would
// otherwise make a batch's input megabytes.
func sharedNodes(nodes *plan.NodeGroup, memberNodes [][]string) (*plan.NodeGroup, [][]string) {
	for _, told := range memberNodes[1:] {
		if !slices.Equal(told, memberNodes[0]) {
			return nodes, memberNodes
		}
	}
	return &plan.NodeGroup{Role: nodes.Role, Nodes: memberNodes[0]}, nil
}

// runBatches starts a wide role operation's batches, at most concurrent at once, and
// applies each one's result as it ends. A configure failure halts the operation: running
// batches start no further member, and waiting ones never start.
func (r *Runner) runBatches(ctx workflow.Context, c Cluster, role string, op *Operation, concurrent int, start func(workflow.Context, *roleBatch)) {
	running := flow.Slots{Limit: concurrent}
	for _, b := range op.batches {
		if err := running.Wait(ctx, 1, func() bool { return op.halted != "" }); err != nil && op.halted == "" {
			op.halted = "canceled"
		}
		if op.halted != "" {
			skipBatch(c.State(), role, b, op.halted)
			continue
		}
		start(ctx, b)
		running.Take(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			var res workflows.RoleResult
			err := b.future.Get(ctx, &res)
			running.Give(1)
			b.done = true
			if err != nil {
				r.markUnfinished(ctx, c, role, op.op, b.in.Members, err)
				return
			}
			r.haltOnFailure(ctx, op, ApplyReport(c.State(), role, res.Members))
			c.Touch(ctx)
		})
	}
}

// skipBatch marks a batch that never started, as configureAll marks members it never starts.
func skipBatch(s *workflows.ClusterState, role string, b *roleBatch, why string) {
	b.done = true
	rs := s.Role(role)
	for _, m := range b.in.Members {
		if current := rs.Member(m.Name); current != nil && current.State == plan.MemberPending {
			current.Detail = "not started: " + why
		}
	}
}

// haltOnFailure stops a batched configure at its first failed member, as one child stops
// at its own: the other batches start no further member.
func (r *Runner) haltOnFailure(ctx workflow.Context, op *Operation, members []plan.Member) {
	if op.op != plan.OpConfigure || op.halted != "" || len(op.batches) < 2 {
		return
	}
	for _, m := range members {
		if m.State == plan.MemberConfigError && m.Detail != "canceled" {
			op.halted = m.Name + " failed"
			for _, b := range op.running() {
				b.future.SignalChildWorkflow(ctx, workflows.StopMembersSignal, workflows.StopMembers{Halt: op.halted})
			}
			return
		}
	}
}
