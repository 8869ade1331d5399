package testenv

import (
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

// ExportHistories writes the history of a workflow and, recursively, of every child it
// started, as JSON files in dir (the format replay tests read). It returns the files.
func ExportHistories(ctx context.Context, c client.Client, workflowID, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	hist, err := History(ctx, c, workflowID)
	if err != nil {
		return nil, err
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, strings.ReplaceAll(workflowID, "/", "_")+".json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return nil, err
	}
	files := []string{file}
	for _, e := range hist.Events {
		if started := e.GetChildWorkflowExecutionStartedEventAttributes(); started != nil {
			more, err := ExportHistories(ctx, c, started.GetWorkflowExecution().GetWorkflowId(), dir)
			if err != nil {
				return nil, err
			}
			files = append(files, more...)
		}
	}
	return files, nil
}

// History reads a workflow's whole history.
func History(ctx context.Context, c client.Client, workflowID string) (*historypb.History, error) {
	iter := c.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
