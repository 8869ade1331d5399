package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// Temporal's bounds that size must never reach: its warning threshold for a history's
// events, and the payload size issue 14 allows.
const (
	maxHistoryEvents = 10240
	maxEventBytes    = 1 << 20
)

// A cluster of 2000 members, through the real CLI and real scripts: deployed in batches,
// every member configured exactly once, no history or event past Temporal's bounds, and
// status complete. It runs alone (no t.Parallel): 2000 scripts take the whole machine.
func TestTwoThousandMembersStayWithinTemporalsBounds(t *testing.T) {
	guard(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "note.sh")
	trace := filepath.Join(dir, "trace.log")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT\" >> \"$TRACE\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "wide.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`
name: twothousand
roles:
  - {name: controller, cardinality: "1", startscript: %[1]s, events: [configure], env: {TRACE: %[2]s}}
  - {name: worker, members: 1999, maxInFlight: 500, dependsOn: [controller], startscript: %[1]s, events: [configure], env: {TRACE: %[2]s}}
`, script, trace)), 0o644); err != nil {
		t.Fatal(err)
	}
	deploy := runFor(t, 150*time.Second, "deploy", "-f", spec, "--wait", "--timeout", "140s")
	if deploy.Code != 0 {
		t.Fatalf("deploy: %s", deploy)
	}
	// --wait follows the roles' counts by state, not pages of 2000 members.
	if !strings.Contains(deploy.Stdout, "1999/1999 ready  (1999 ready)") {
		t.Errorf("deploy --wait should end on every worker counted ready: %s", deploy)
	}

	status := cli(t, "status", "twothousand")
	if status.Code != 0 || !strings.Contains(status.Stdout, "2000 of 2000 members ready") {
		t.Errorf("status of a large cluster should sum it up: %s", status)
	}
	s := statusJSON(t, "twothousand")
	if n := len(s.Role("worker").Members); n != 1999 || s.Role("worker").Ready != 1999 {
		t.Errorf("status -o json lists %d workers, %d ready; want all 1999", n, s.Role("worker").Ready)
	}

	runs := map[string]int{}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		runs[line]++
	}
	if len(runs) != 2000 {
		t.Errorf("%d distinct member events ran, want 2000 configures", len(runs))
	}
	for run, n := range runs {
		if n != 1 {
			t.Errorf("%s ran %d times", run, n)
		}
	}
	checkHistoryBounds(t, workflows.ClusterWorkflowID("twothousand"))

	if del := runFor(t, 150*time.Second, "delete", "twothousand", "--wait", "--timeout", "140s"); del.Code != 0 {
		t.Fatalf("delete: %s", del)
	}
	checkHistoryBounds(t, workflows.ClusterWorkflowID("twothousand"))
}

// runFor runs the CLI against the shared server with a deadline of its own.
func runFor(t *testing.T, limit time.Duration, args ...string) testenv.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := testenv.Run(ctx, t.TempDir(), cliEnv, args...)
	if err != nil {
		t.Fatalf("clusterflow %v: %v", args, err)
	}
	return res
}

// checkHistoryBounds reads every run of the workflows whose IDs start with prefix (a
// cluster and its role children) and fails on a history or an event past the bounds.
func checkHistoryBounds(t *testing.T, prefix string) {
	t.Helper()
	c, err := testenv.Dial(server.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: "default", PageSize: 1000, Query: fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Executions) < 9 {
		t.Errorf("found %d workflows of %s; want the cluster and its 8 batches at least", len(resp.Executions), prefix)
	}
	for _, e := range resp.Executions {
		events := 0
		it := c.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if size := ev.Size(); size > maxEventBytes {
				t.Errorf("%s event %d (%s) is %d bytes, more than %d", e.Execution.WorkflowId, ev.EventId, ev.EventType, size, maxEventBytes)
			}
		}
		if events > maxHistoryEvents {
			t.Errorf("%s has %d events, more than %d", e.Execution.WorkflowId, events, maxHistoryEvents)
		}
	}
}
