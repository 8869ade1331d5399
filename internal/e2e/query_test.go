package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// A worker cut off from the server (its host's link down) leaves its polls open there, and
// the server hands a query to each of them in turn; none is ever answered. Fleet tests saw
// `status` and `hosts` fail so while one of two hosts was cut. Here three such polls are
// open on the cluster's task queue, made by the test, and the workflow's own worker comes
// back only once all three took a query: `status` still answers. Two attempts of 15 s each,
// as status asked before, spent themselves on the first two polls.
func TestStatusOutlastsTheOpenPollsOfAWorkerCutOff(t *testing.T) {
	t.Parallel()
	guard(t)
	const queue, name = "cut-off-polls", "cut-off-polls"
	answering := func() sdkworker.Worker {
		w := sdkworker.New(server.Client, queue, sdkworker.Options{})
		w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
			if err := workflow.SetQueryHandler(ctx, workflows.StatusQuery, func(*workflows.StatusPage) (workflows.ClusterStatus, error) {
				return workflows.ClusterStatus{Name: name, Phase: workflows.PhaseReady, Message: "answered by a worker that polls"}, nil
			}); err != nil {
				return err
			}
			return workflow.Await(ctx, func() bool { return false })
		}, workflow.RegisterOptions{Name: "CutOffPollsWorkflow"})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := answering()
	run, err := server.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ClusterWorkflowID(name), TaskQueue: queue}, "CutOffPollsWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Client.TerminateWorkflow(context.Background(), run.GetID(), "", "the test is over")
	// Its first workflow task done, a query needs a worker, and this one leaves.
	waitFor(t, "the workflow answering", func() bool {
		_, err := server.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery, workflows.StatusPage{})
		return err == nil
	})
	w.Stop()
	if _, err := server.Client.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: run.GetID()},
	}); err != nil {
		t.Fatal(err)
	}

	// The cut-off worker's polls: each takes one task and never answers it.
	const polls = 3
	took := make(chan string, polls)
	var wg sync.WaitGroup
	for range polls {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := server.Client.WorkflowService().PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
					Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: "cut-off",
				})
				if err == nil && len(resp.GetTaskToken()) > 0 {
					took <- resp.GetQuery().GetQueryType()
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer cancel()

	// The goroutine only runs the CLI: the test judges its result, so nothing logs after
	// the test ends.
	answer := make(chan testenv.Result, 1)
	go func() {
		res, err := testenv.Run(ctx, t.TempDir(), cliEnv, "status", name)
		if err != nil {
			res = testenv.Result{Code: -1, Stderr: err.Error()}
		}
		answer <- res
	}()
	for range polls {
		select {
		case q := <-took:
			if q != workflows.StatusQuery {
				t.Fatalf("a cut-off poll took %q, not the status query", q)
			}
		case res := <-answer:
			t.Fatalf("status returned before the cut-off polls had each taken its query: %s", res)
		case <-ctx.Done():
			t.Fatal("the cut-off polls did not each take a query within 2 minutes")
		}
	}
	defer answering().Stop()
	select {
	case res := <-answer:
		if res.Code != 0 || !strings.Contains(res.Stdout, "answered by a worker that polls") {
			t.Errorf("status while a cut-off worker's polls were open: %s", res)
		}
	case <-ctx.Done():
		t.Fatal("status did not return within 2 minutes")
	}
}
