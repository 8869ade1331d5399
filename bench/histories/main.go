// Command histories checks the bounds that scale depends on, for every workflow on a
// Temporal server: the events in its history and its largest event (an event holds at
// most a few payloads, so this bounds them). It prints the largest of each, and exits 1
// when a history passes maxEvents or an event passes maxEventBytes.
//
//	go run ./bench/histories [-max-events 10240] [-max-event-bytes 1048576]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

func main() {
	maxEvents := flag.Int("max-events", 10240, "most events a history may hold (Temporal's warning threshold)")
	maxEventBytes := flag.Int("max-event-bytes", 1<<20, "largest event allowed")
	flag.Parse()
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer c.Close()
	ctx := context.Background()
	var histories, over int
	var mostEvents, biggest int
	var mostEventsID, biggestID string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1000, NextPageToken: token})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, e := range resp.Executions {
			histories++
			id := e.Execution.WorkflowId + " " + e.Execution.RunId
			events := 0
			it := c.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				events++
				if size := ev.Size(); size > biggest {
					biggest, biggestID = size, fmt.Sprintf("%s event %d (%s)", id, ev.EventId, ev.EventType)
				}
			}
			if events > mostEvents {
				mostEvents, mostEventsID = events, id
			}
			if events > *maxEvents {
				over++
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	fmt.Printf("%d histories; most events %d (%s); largest event %d bytes (%s)\n", histories, mostEvents, mostEventsID, biggest, biggestID)
	if over > 0 || biggest > *maxEventBytes {
		fmt.Printf("over the bounds: %d histories above %d events; largest event %d bytes, bound %d\n", over, *maxEvents, biggest, *maxEventBytes)
		os.Exit(1)
	}
}
