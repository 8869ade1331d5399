package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/worker"
)

// TestReplayRecordedHistories replays histories recorded from real deploys, deletes and
// failures (see internal/e2e/record_test.go), one folder per generation of workflow code. A change to workflow code that would break
// running workflows fails here; make such changes behind workflow.GetVersion.
//
// Every history also replays on a worker with the codec (testdata/codec-test.keys): plain
// ones, recorded before the codec, as a live cluster's do once the codec is turned on, and
// the encrypted ones of v11-codec, which need the key.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata")
	}
	keyLines, err := os.ReadFile("testdata/codec-test.keys")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := codec.ParseKeys(keyLines)
	if err != nil {
		t.Fatal(err)
	}
	encrypted := 0
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			isEncrypted := strings.Contains(string(data), `"encryption-key-id"`)
			if isEncrypted {
				encrypted++
			} else {
				replay(t, file, sdkworker.WorkflowReplayerOptions{})
			}
			dc, fc := codec.Converters(nil, keys)
			replay(t, file, sdkworker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc})
		})
	}
	if encrypted == 0 {
		t.Error("no encrypted history was replayed")
	}
}

func replay(t *testing.T, file string, opts sdkworker.WorkflowReplayerOptions) {
	t.Helper()
	replayer, err := sdkworker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	worker.RegisterWorkflows(replayer)
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), file); err != nil {
		t.Fatal(err)
	}
}
