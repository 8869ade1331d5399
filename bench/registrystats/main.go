// Command registrystats prints what the host registry's workflows hold now: for the
// directory and each shard, its current run's history length and size and its pending
// activities (a lease or check-in a host), and the largest of each. It is how bench/fleet.sh
// shows that no workflow of the registry nears Temporal's limits (2,000 pending activities,
// 51,200 events and 50 MB a run) at any fleet size. With -cluster, it prints the largest
// run of that cluster's workflow too, how many runs it took, and the attempts of its
// activities and its children's that timed out, by timeout: a heartbeat timeout on a
// host is a task started there and never run (hosts' onHostCtx).
//
//	TEMPORAL_ADDRESS=127.0.0.1:7233 go run ./bench/registrystats [-each] [-cluster NAME]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/failure/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func main() {
	each := flag.Bool("each", false, "print every shard, not only the largest")
	cluster := flag.String("cluster", "", "print the largest run of this cluster's workflow too")
	flag.Parse()
	co, _, err := starter.ClientOptions(starter.ConnectOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.Dial(co)
	if err != nil {
		fail(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.QueryWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.RegistryQuery)
	if err != nil {
		fail(err)
	}
	var info workflows.RegistryInfo
	if err := resp.Get(&info); err != nil {
		fail(err)
	}
	ids := []string{workflows.HostsWorkflowID}
	for _, shard := range info.Shards {
		ids = append(ids, workflows.HostShardWorkflowID(shard))
	}
	var maxEvents, maxBytes int64
	maxPending := 0
	for _, id := range ids {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			fail(err)
		}
		events, bytes := d.GetWorkflowExecutionInfo().GetHistoryLength(), d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
		pending := len(d.GetPendingActivities())
		if *each {
			fmt.Printf("%-22s %7d events %9d bytes %5d pending activities\n", id, events, bytes, pending)
		}
		maxEvents, maxBytes, maxPending = max(maxEvents, events), max(maxBytes, bytes), max(maxPending, pending)
	}
	fmt.Printf("registry: %d shards; largest run %d events, %d KiB; most pending activities %d\n", len(info.Shards), maxEvents, maxBytes>>10, maxPending)
	if *cluster != "" {
		printClusterRuns(ctx, c, *cluster)
	}
}

// printClusterRuns prints the largest of a cluster workflow's runs, as visibility records
// them, and its activities' timed-out attempts.
func printClusterRuns(ctx context.Context, c client.Client, name string) {
	var runs int
	var maxEvents, maxBytes int64
	timedOut := map[string]int{}
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", workflows.ClusterWorkflowID(name))}
	for {
		resp, err := c.ListWorkflow(ctx, req)
		if err != nil {
			fail(err)
		}
		for _, e := range resp.GetExecutions() {
			runs++
			countTimeouts(ctx, c, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), timedOut)
			if e.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				// Visibility counts a run's history once it closes; the server knows it now.
				d, err := c.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
				if err != nil {
					fail(err)
				}
				e = d.GetWorkflowExecutionInfo()
			}
			maxEvents, maxBytes = max(maxEvents, e.GetHistoryLength()), max(maxBytes, e.GetHistorySizeBytes())
		}
		if req.NextPageToken = resp.GetNextPageToken(); len(req.NextPageToken) == 0 {
			break
		}
	}
	fmt.Printf("cluster %s: %d runs; largest run %d events, %d KiB; attempts timed out, with its children's: %v\n", name, runs, maxEvents, maxBytes>>10, timedOut)
}

// countTimeouts counts a run's activity attempts that timed out, and its children's, by
// timeout type and activity: a retried attempt leaves no event, the next attempt's start
// says why it was retried.
func countTimeouts(ctx context.Context, c client.Client, workflowID, runID string, counts map[string]int) {
	types := map[int64]string{}
	count := func(scheduled int64, f *failure.Failure) {
		if info := f.GetTimeoutFailureInfo(); info != nil {
			counts[fmt.Sprintf("%s %s", types[scheduled], strings.TrimPrefix(info.GetTimeoutType().String(), "TIMEOUT_TYPE_"))]++
		}
	}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			fail(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			count(a.GetScheduledEventId(), a.GetLastFailure())
		}
		if a := e.GetActivityTaskTimedOutEventAttributes(); a != nil {
			count(a.GetScheduledEventId(), a.GetFailure())
		}
		if a := e.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			countTimeouts(ctx, c, a.GetWorkflowExecution().GetWorkflowId(), a.GetWorkflowExecution().GetRunId(), counts)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "registrystats:", err)
	os.Exit(1)
}
