// Command timeline prints a cluster's workflow events (its own and every role operation's)
// on one time axis, in milliseconds from the cluster's start, to show where a deploy's time
// goes between workflow tasks, activities and children.
//
//	TEMPORAL_ADDRESS=127.0.0.1:7233 go run ./bench/timeline -cluster bench-1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func main() {
	cluster := flag.String("cluster", "", "the cluster whose histories to print")
	flag.Parse()
	if err := run(*cluster); err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
		os.Exit(1)
	}
}

type event struct {
	at       time.Time
	workflow string
	what     string
}

func run(cluster string) error {
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
	id := workflows.ClusterWorkflowID(cluster)
	var events []event
	err = testenv.WalkHistories(context.Background(), c, id, func(workflowID string, run int, h *historypb.History) error {
		name := strings.TrimPrefix(workflowID, id)
		if name == "" {
			name = "cluster"
		}
		if run > 0 {
			name += fmt.Sprintf(" (run -%d)", run)
		}
		for _, e := range h.Events {
			what := strings.TrimPrefix(e.EventType.String(), "EventType")
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				what += " " + a.ActivityType.GetName()
			}
			events = append(events, event{e.EventTime.AsTime(), name, what})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("no events for cluster %s", cluster)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	start := events[0].at
	for _, e := range events {
		fmt.Printf("%7.1f  %-40s %s\n", float64(e.at.Sub(start).Microseconds())/1000, e.workflow, e.what)
	}
	return nil
}
