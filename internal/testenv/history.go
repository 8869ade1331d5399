package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
)

// ExportHistories writes the history of a workflow, of each run it continued as new from,
// and, recursively, of every child they started, as gzipped JSON files in dir (the format
// replay tests read; JSON histories repeat themselves and shrink about ninefold). It
// returns the files.
func ExportHistories(ctx context.Context, c client.Client, workflowID, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	err := WalkHistories(ctx, c, workflowID, func(id string, run int, hist *historypb.History) error {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
		if err != nil {
			return err
		}
		// The replay test reads the workflow ID back from the name.
		if strings.Contains(id, "_") {
			return fmt.Errorf("workflow ID %q holds '_', which names a history file '/'", id)
		}
		name := strings.ReplaceAll(id, "/", "_")
		if run > 0 {
			name += fmt.Sprintf("_previous-run-%d", run)
		}
		file := filepath.Join(dir, name+".json.gz")
		files = append(files, file)
		var packed bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&packed, gzip.BestCompression)
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		return os.WriteFile(file, packed.Bytes(), 0o644)
	})
	return files, err
}

// WalkHistories reads the history of a workflow's latest run (run 0), then of each run it
// continued as new from (1, 2 …), each followed, recursively, by those of the children it
// started, and hands each to visit.
func WalkHistories(ctx context.Context, c client.Client, workflowID string, visit func(workflowID string, run int, hist *historypb.History) error) error {
	for runID, run := "", 0; ; run++ {
		hist, err := RunHistory(ctx, c, workflowID, runID)
		if err != nil {
			return err
		}
		if err := visit(workflowID, run, hist); err != nil {
			return err
		}
		for _, e := range hist.Events {
			if started := e.GetChildWorkflowExecutionStartedEventAttributes(); started != nil {
				if err := WalkHistories(ctx, c, started.GetWorkflowExecution().GetWorkflowId(), visit); err != nil {
					return err
				}
			}
		}
		runID = hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if runID == "" {
			return nil
		}
	}
}

// History reads the whole history of a workflow's latest run.
func History(ctx context.Context, c client.Client, workflowID string) (*historypb.History, error) {
	return RunHistory(ctx, c, workflowID, "")
}

// RunHistory reads the whole history of one run of a workflow; an empty runID means the
// latest.
func RunHistory(ctx context.Context, c client.Client, workflowID, runID string) (*historypb.History, error) {
	iter := c.GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		hist.Events = append(hist.Events, e)
	}
	return hist, nil
}
