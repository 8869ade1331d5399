package workflows_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/clusterflow/clusterflow/worker"
)

// TestReplayRecordedHistories replays histories recorded from real deploys, deletes and
// failures (see internal/e2e/record_test.go), one folder per generation of workflow code. A change to workflow code that would break
// running workflows fails here; make such changes behind workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata")
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			replayer := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(replayer)
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), file); err != nil {
				t.Fatal(err)
			}
		})
	}
}
