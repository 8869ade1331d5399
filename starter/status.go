package starter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/workflows"
)

// queryPatience bounds a query of a cluster's workflow, which needs a running worker to
// answer; it is asked patiently (askPatiently) within it.
const queryPatience = 30 * time.Second

// statusPageMembers is how many members one status query asks for: about 500 KiB of
// answer, well within what Temporal lets a query return (2 MiB).
const statusPageMembers = 2000

// Status asks the cluster's workflow for its status, and adds running scripts' latest
// lines of output.
func (s *Starter) Status(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	status, err := s.query(ctx, name, true)
	if err == nil {
		s.addLastLines(ctx, &status)
	}
	return status, err
}

// Counts is the cluster's status with its roles' counts of members by state but no member
// lists: one small query whatever the cluster's size.
func (s *Starter) Counts(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	return s.query(ctx, name, false)
}

// query asks the cluster's workflow for its status, as the status query answers it: with
// every member, or (withMembers false) with the roles' counts alone. A workflow that did
// not end cleanly (terminated from the Web UI, say) no longer manages its cluster,
// whatever its last phase says: the status says so.
func (s *Starter) query(ctx context.Context, name string, withMembers bool) (workflows.ClusterStatus, error) {
	status, err := s.queryIf(ctx, name, enums.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY, withMembers)
	if final, ok := s.resultOfCompleted(ctx, name, err); ok {
		return final, nil
	}
	var closed *closedError
	// A query that reaches a run as it continues as new is refused by that run; the next
	// run answers a moment later.
	for try := 0; errors.As(err, &closed) && closed.continued && try < 20; try++ {
		select {
		case <-ctx.Done():
			return status, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		status, err = s.queryIf(ctx, name, enums.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY, withMembers)
	}
	if !errors.As(err, &closed) {
		return status, err
	}
	// Its last state still tells what it left behind, when a worker can replay it.
	status, err = s.queryIf(ctx, name, enums.QUERY_REJECT_CONDITION_NONE, withMembers)
	if err != nil {
		status = workflows.ClusterStatus{Name: name}
	}
	if status.Phase == workflows.PhaseDeleted {
		return status, nil // cancelled from outside, it deleted the cluster before it ended
	}
	last := "unknown"
	if status.Phase != "" {
		last = string(status.Phase)
	}
	status.Phase = workflows.PhaseTerminated
	status.Message = fmt.Sprintf("its workflow was %s (last phase %s), so clusterflow no longer manages it: members and sandboxes are left as they were", closed.how, last)
	return status, nil
}

// closedError is a status query rejected because the workflow ended other than cleanly.
type closedError struct {
	how string
	// continued says the run continued as new: the cluster's workflow still runs.
	continued bool
}

func (e *closedError) Error() string { return "the cluster's workflow was " + e.how }

// queryIf asks for the status a page of members at a time, and puts the pages together.
// A cluster that changes between pages may show a member twice or miss one that came
// meanwhile; a member listed twice is listed once. Without members, it asks for an empty
// page: the roles' counts by state still come whole.
func (s *Starter) queryIf(ctx context.Context, name string, reject enums.QueryRejectCondition, withMembers bool) (workflows.ClusterStatus, error) {
	if !withMembers {
		return s.queryPage(ctx, name, reject, workflows.StatusPage{Limit: 0})
	}
	status, err := s.queryPage(ctx, name, reject, workflows.StatusPage{Limit: statusPageMembers})
	// A page stops early once its members reach the workflow's budget of bytes: the next
	// one starts where it stopped.
	for from := status.Listed(); err == nil && from < status.MemberCount(); {
		var page workflows.ClusterStatus
		if page, err = s.queryPage(ctx, name, reject, workflows.StatusPage{From: from, Limit: statusPageMembers}); err == nil {
			if page.Listed() == 0 {
				return status, fmt.Errorf("status of %s: the page from member %d lists none of them", name, from)
			}
			status.AddMembers(page)
			from += page.Listed()
		}
	}
	return status, err
}

// resultOfCompleted is, when a status query failed (err) on a cluster whose workflow has
// completed, the status the workflow returned: its last state too, with its first members
// (workflows.ResultStatusBytes). A query of a completed workflow replays its whole history
// on a worker, which can fail: the SDK failed one with an illegal state of its own
// ("[TMPRL1100] invalid state transition") on the worker that had completed the workflow
// 0.3 s before, in a `delete --wait` of the hosts test, whose history replays cleanly.
func (s *Starter) resultOfCompleted(ctx context.Context, name string, err error) (workflows.ClusterStatus, bool) {
	var failed *serviceerror.QueryFailed
	if !errors.As(err, &failed) {
		return workflows.ClusterStatus{}, false
	}
	id := workflows.ClusterWorkflowID(name)
	d, derr := s.client.DescribeWorkflowExecution(ctx, id, "")
	if derr != nil || d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return workflows.ClusterStatus{}, false
	}
	var final workflows.ClusterStatus
	if err := s.client.GetWorkflow(ctx, id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId()).Get(ctx, &final); err != nil {
		return workflows.ClusterStatus{}, false
	}
	return final, true
}

func (s *Starter) queryPage(ctx context.Context, name string, reject enums.QueryRejectCondition, page workflows.StatusPage) (workflows.ClusterStatus, error) {
	var status workflows.ClusterStatus
	var resp *client.QueryWorkflowWithOptionsResponse
	err := askPatiently(ctx, queryPatience, func(actx context.Context) (err error) {
		resp, err = s.client.QueryWorkflowWithOptions(actx, &client.QueryWorkflowWithOptionsRequest{
			WorkflowID: workflows.ClusterWorkflowID(name), QueryType: workflows.StatusQuery, QueryRejectCondition: reject,
			Args: []any{page},
		})
		return err
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return status, ctx.Err()
	case isNotFound(err):
		return status, notFound(name)
	case noAnswer(err):
		return status, noWorker(s.taskQueue, err)
	case err != nil:
		return status, fmt.Errorf("query status of %s: %w", name, err)
	}
	if rejected := resp.QueryRejected; rejected != nil {
		return status, &closedError{how: closedHow(rejected.GetStatus()), continued: rejected.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW}
	}
	if err := resp.QueryResult.Get(&status); err != nil {
		return status, fmt.Errorf("decode status of %s: %w", name, err)
	}
	return status, nil
}

// queryCluster asks the cluster's workflow queryType with args and decodes the answer into
// into; what names the question in errors ("preview the change to demo").
func (s *Starter) queryCluster(ctx context.Context, name, queryType, what string, into any, args ...any) error {
	var value converter.EncodedValue
	err := askPatiently(ctx, queryPatience, func(actx context.Context) (err error) {
		value, err = s.client.QueryWorkflow(actx, workflows.ClusterWorkflowID(name), "", queryType, args...)
		return err
	})
	switch {
	case isNotFound(err):
		return notFound(name)
	case noAnswer(err):
		return noWorker(s.taskQueue, err)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := value.Get(into); err != nil {
		return fmt.Errorf("%s: decode the answer: %w", what, err)
	}
	return nil
}
