package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
)

// A cluster whose workflow was terminated (the Web UI has a button for it) is no longer
// managed: status says so, with its last phase, instead of showing that phase as current.
func TestStatusOfATerminatedClusterSaysSo(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "terminated"
	specPath, _ := writeCluster(t, `
name: terminated
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := server.Client.TerminateWorkflow(ctx, workflows.ClusterWorkflowID(n), "", "from the test, as from the Web UI"); err != nil {
		t.Fatal(err)
	}
	res := cli(t, "status", n)
	if res.Code != 0 || !strings.Contains(res.Stdout, "Phase:    terminated (its workflow was terminated (last phase ready), so clusterflow no longer manages it") {
		t.Errorf("status: %s", res)
	}
	var s workflows.ClusterStatus
	res = cli(t, "status", n, "-o", "json")
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil || s.Phase != workflows.PhaseTerminated || len(s.Roles) != 1 || len(s.Roles[0].Members) != 2 {
		t.Errorf("status -o json: %v %s", err, res)
	}
	if res := cli(t, "status", n, "--wait", "--timeout", "30s"); res.Code != 1 || !strings.Contains(res.Stderr, "its workflow was terminated") {
		t.Errorf("status --wait of a terminated cluster should fail at once: %s", res)
	}
	// Changes are refused, saying why.
	if res := cli(t, "resize", n, "only=3"); res.Code != 2 || !strings.Contains(res.Stderr, `cluster "terminated" takes no more changes: its workflow was terminated`) {
		t.Errorf("resize of a terminated cluster: %s", res)
	}
}

// A status query of a completed workflow replays its history on a worker, which can fail:
// the SDK once failed one with an illegal state of its own, right after the workflow
// completed (a `delete --wait` of the hosts test). The status is then the workflow's result,
// its last state; a query that fails on a running workflow still fails, saying why. The
// workflows here answer the status query with an error, on a worker of the test's own.
func TestStatusOfACompletedClusterWhoseQueryFailsIsItsResult(t *testing.T) {
	t.Parallel()
	guard(t)
	const queue = "query-fails"
	w := sdkworker.New(server.Client, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, name string, hold bool) (workflows.ClusterStatus, error) {
		if err := workflow.SetQueryHandler(ctx, workflows.StatusQuery, func(*workflows.StatusPage) (workflows.ClusterStatus, error) {
			return workflows.ClusterStatus{}, errors.New("this status query always fails")
		}); err != nil {
			return workflows.ClusterStatus{}, err
		}
		if hold {
			_ = workflow.Await(ctx, func() bool { return false })
		}
		return workflows.ClusterStatus{Name: name, Phase: workflows.PhaseDeleted, Message: "deleted, as its result says"}, nil
	}, workflow.RegisterOptions{Name: "QueryFailsWorkflow"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		hold bool
	}{{"query-fails-done", false}, {"query-fails-running", true}} {
		run, err := server.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ClusterWorkflowID(c.name), TaskQueue: queue}, "QueryFailsWorkflow", c.name, c.hold)
		if err != nil {
			t.Fatal(err)
		}
		if c.hold {
			defer server.Client.TerminateWorkflow(context.Background(), run.GetID(), "", "the test is over")
		} else if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if res := cli(t, "status", "query-fails-done"); res.Code != 0 || !strings.Contains(res.Stdout, "deleted, as its result says") {
		t.Errorf("status of a completed cluster whose query fails: %s", res)
	}
	if res := cli(t, "status", "query-fails-running"); res.Code == 0 || !strings.Contains(res.Stderr, "this status query always fails") {
		t.Errorf("status of a running cluster whose query fails: %s", res)
	}
}
