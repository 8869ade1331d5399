// Package histories measures what workflows left in Temporal against the bounds clusterflow
// keeps: the events and bytes of each history, the largest event (an event holds at most a
// payload or two), and the largest workflow task, the commands one task's completion
// recorded (Temporal refuses a completion past 4 MiB). The end-to-end tests and the
// benchmarks both read histories through it.
package histories

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Sizes are the largest of each measure over the histories read, and where each was.
type Sizes struct {
	// Largest is the largest event of each type, for a payload's growth by kind.
	Largest                            map[enums.EventType]int
	Histories                          int
	Events, Bytes, Event, Task         int
	EventsOf, BytesOf, EventOf, TaskOf string
}

func (s Sizes) String() string {
	return fmt.Sprintf("%d histories; largest history %d events (%s), %d bytes (%s); largest event %d bytes (%s); largest task %d bytes (%s)",
		s.Histories, s.Events, s.EventsOf, s.Bytes, s.BytesOf, s.Event, s.EventOf, s.Task, s.TaskOf)
}

// ByType lists the largest event of each of the most common payload-carrying types.
func (s Sizes) ByType() string {
	var parts []string
	for _, t := range []enums.EventType{
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enums.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
	} {
		if n, ok := s.Largest[t]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(t.String(), "EVENT_TYPE_"), n))
		}
	}
	return strings.Join(parts, ", ")
}

// Bounds are the limits the reference (docs/reference.md) states for every workflow: Temporal's warning threshold
// for events, well under its 50 MB for bytes, half its 2 MiB payload limit for an event, and
// half its 4 MiB message limit for a task.
var Bounds = Sizes{Events: 10240, Bytes: 32 << 20, Event: 1 << 20, Task: 2 << 20}

// Within reports whether s keeps within bounds.
func (s Sizes) Within(bounds Sizes) bool {
	return s.Events <= bounds.Events && s.Bytes <= bounds.Bytes && s.Event <= bounds.Event && s.Task <= bounds.Task
}

// commandEvents are the events a workflow task's completion records for its commands.
var commandEvents = map[enums.EventType]bool{
	enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:                              true,
	enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:             true,
	enums.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:         true,
	enums.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: true,
	enums.EVENT_TYPE_TIMER_STARTED:                                        true,
	enums.EVENT_TYPE_TIMER_CANCELED:                                       true,
	enums.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:                       true,
	enums.EVENT_TYPE_MARKER_RECORDED:                                      true,
	enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:                    true,
	enums.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:                         true,
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:                   true,
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:                  true,
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:                         true,
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:                  true,
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:                            true,
}

// Measure reads every run of every workflow the visibility query matches ("" for all).
func Measure(ctx context.Context, c client.Client, namespace, query string) (Sizes, error) {
	var s Sizes
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1000, NextPageToken: token, Query: query})
		if err != nil {
			return s, err
		}
		for _, e := range resp.Executions {
			if err := s.add(ctx, c, e.Execution.WorkflowId, e.Execution.RunId); err != nil {
				return s, err
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return s, nil
		}
	}
}

// add reads one history. A task's commands are the command events right after its
// WorkflowTaskCompleted.
func (s *Sizes) add(ctx context.Context, c client.Client, workflowID, runID string) error {
	s.Histories++
	id := workflowID + " " + runID
	events, bytes, task, inTask := 0, 0, 0, false
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		size := ev.Size()
		if s.Largest == nil {
			s.Largest = map[enums.EventType]int{}
		}
		s.Largest[ev.EventType] = max(s.Largest[ev.EventType], size)
		events++
		bytes += size
		if size > s.Event {
			s.Event, s.EventOf = size, fmt.Sprintf("%s event %d %s", id, ev.EventId, ev.EventType)
		}
		switch {
		case ev.EventType == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			task, inTask = 0, true
		case inTask && commandEvents[ev.EventType]:
			task += size
			if task > s.Task {
				s.Task, s.TaskOf = task, fmt.Sprintf("%s up to event %d", id, ev.EventId)
			}
		default:
			inTask = false
		}
	}
	if events > s.Events {
		s.Events, s.EventsOf = events, id
	}
	if bytes > s.Bytes {
		s.Bytes, s.BytesOf = bytes, id
	}
	return nil
}
