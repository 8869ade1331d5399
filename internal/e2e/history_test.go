package e2e

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// TestClusterHistoryGrowsWithRolesNotMembers deploys a large role and checks that the
// cluster workflow's own history stays small: per-member work lives in the role's child.
// It runs alone, before the parallel tests start: its 300 scripts at once would crowd the
// tests that time health reports.
func TestClusterHistoryGrowsWithRolesNotMembers(t *testing.T) {
	guard(t)
	specPath, trace := writeCluster(t, `
name: wide
roles:
  - {name: controller, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 300, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "1"}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	if runs := runsOf(readTrace(t, trace), "wide-worker-", "configure"); len(runs) != 300 {
		t.Fatalf("want 300 worker configures, got %d", len(runs))
	}
	clusterEvents := countEvents(t, workflows.ClusterWorkflowID("wide"))
	// 300 workers are more than a batch: two children, of 250 and 50.
	roleEvents := 0
	for _, batch := range []string{"batch-1-of-2", "batch-2-of-2"} {
		roleEvents += countEvents(t, workflows.ClusterWorkflowID("wide")+"/configure-1/worker/"+batch)
	}
	t.Logf("history events: cluster %d, worker role %d", clusterEvents, roleEvents)
	// About 60 events: two levels, and a few coalesced progress reports. Per-member events
	// would be thousands.
	if clusterEvents > 150 {
		t.Errorf("the cluster workflow has %d history events for 2 roles; it should not grow with members", clusterEvents)
	}
	if roleEvents < 300 {
		t.Errorf("the worker role's history has only %d events; per-member work should be there", roleEvents)
	}
	mustSucceed(t, "delete", "wide", "--wait")
}

func countEvents(t *testing.T, workflowID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iter := server.Client.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for iter.HasNext() {
		if _, err := iter.Next(); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// history reads a workflow's history from the shared server.
func history(t *testing.T, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hist, err := testenv.History(ctx, server.Client, workflowID)
	if err != nil {
		t.Fatal(err)
	}
	return hist.Events
}

// TestAnIdleReconcileAddsFewEvents checks that periodic reconciles are cheap: each adds a
// handful of events to the cluster's history (continue-as-new bounds the total).
func TestAnIdleReconcileAddsFewEvents(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: idle
reconcileEvery: 1s
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	id := workflows.ClusterWorkflowID("idle")
	reconciles := func(events []*historypb.HistoryEvent) int {
		n := 0
		for _, e := range events {
			if isReconcileListing(e) {
				n++
			}
		}
		return n
	}
	before := history(t, id)
	var after []*historypb.HistoryEvent
	waitFor(t, "five more reconciles", func() bool {
		after = history(t, id)
		return reconciles(after) >= reconciles(before)+5
	})
	added, done := len(after)-len(before), reconciles(after)-reconciles(before)
	t.Logf("%d reconciles added %d events", done, added)
	if added > 12*done {
		t.Errorf("%d reconciles added %d events; an idle reconcile should add about 10", done, added)
	}
	mustSucceed(t, "delete", "idle", "--wait")
}

// isReconcileListing reports whether the event schedules a reconcile's listing of the
// backend's members: ListMemberOrdinals, or ListMembers in runs from before bounded payloads.
func isReconcileListing(e *historypb.HistoryEvent) bool {
	switch e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() {
	case "ListMembers", "ListMemberOrdinals":
		return true
	}
	return false
}
