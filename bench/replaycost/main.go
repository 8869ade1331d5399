// Command replaycost replays the histories of one cluster (its workflow and every role
// operation under it) from a Temporal server, as a worker does after a cache miss, and
// prints how long each took, with a CPU profile when -cpuprofile is set. A replay that
// takes seconds is what the SDK's deadlock detector turns into a failed task or query.
//
//	TEMPORAL_ADDRESS=127.0.0.1:7233 go run ./bench/replaycost -cluster big [-cpuprofile replay.cpu]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
)

func main() {
	cluster := flag.String("cluster", "", "the cluster whose histories to replay")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the replays here")
	flag.Parse()
	if err := run(*cluster, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "replaycost:", err)
		os.Exit(1)
	}
}

func run(cluster, cpuprofile string) error {
	co, _, err := starter.ClientOptions(starter.ConnectOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.Dial(co)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	prefix := workflows.ClusterWorkflowID(cluster)
	var runs []*workflowservice.ListWorkflowExecutionsResponse
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1000, NextPageToken: token})
		if err != nil {
			return err
		}
		runs = append(runs, resp)
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	type replay struct {
		id      string
		events  int
		took    time.Duration
		failure error
	}
	var histories []*history.History
	var ids []string
	for _, page := range runs {
		for _, e := range page.Executions {
			id := e.Execution.WorkflowId
			if id != prefix && !strings.HasPrefix(id, prefix+"/") {
				continue
			}
			h := &history.History{}
			it := c.GetWorkflowHistory(ctx, id, e.Execution.RunId, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return err
				}
				h.Events = append(h.Events, ev)
			}
			histories = append(histories, h)
			ids = append(ids, id+" "+e.Execution.RunId)
		}
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var done []replay
	for i, h := range histories {
		replayer := sdkworker.NewWorkflowReplayer()
		worker.RegisterWorkflows(replayer)
		start := time.Now()
		err := replayer.ReplayWorkflowHistory(nil, h)
		done = append(done, replay{ids[i], len(h.Events), time.Since(start), err})
	}
	sort.Slice(done, func(i, j int) bool { return done[i].took > done[j].took })
	for i, r := range done {
		if i == 10 {
			fmt.Printf("... and %d more\n", len(done)-10)
			break
		}
		fmt.Printf("%8.0f ms %6d events  %s", float64(r.took.Microseconds())/1000, r.events, r.id)
		if r.failure != nil {
			fmt.Printf("  FAILED: %v", r.failure)
		}
		fmt.Println()
	}
	return nil
}
