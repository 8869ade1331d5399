package workflows_test

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/worker"
)

// TestReplayRecordedHistories replays histories recorded from real deploys, deletes and
// failures (see internal/e2e/record_test.go), one folder per generation of workflow code,
// each history gzipped JSON. A change to workflow code that would break running workflows
// fails here; make such changes behind workflow.GetVersion.
//
// Every history also replays on a worker with the codec (testdata/codec-test.keys): plain
// ones, recorded before the codec, as a live cluster's do once the codec is turned on, and
// the encrypted ones of v11-codec, which need the key.
//
// Histories replay in parallel (each replayer is its own), and without the race detector:
// replay runs one workflow goroutine at a time, and took 36 s under the detector. Nor with
// the SDK's deadlock detector: it fails a workflow goroutine that ran for 1 s of wall time,
// which a starved CPU can cause (CI replays at nice 15 beside the end-to-end tests) and
// says nothing about whether the history replays.
func TestReplayRecordedHistories(t *testing.T) {
	withoutRace(t)
	files, err := filepath.Glob("testdata/*/*/*.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata")
	}
	if plain, _ := filepath.Glob("testdata/*/*/*.json"); len(plain) > 0 {
		t.Fatalf("%s is not gzipped; the replay reads only *.json.gz", plain[0])
	}
	keyLines, err := os.ReadFile("testdata/codec-test.keys")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := codec.ParseKeys(keyLines)
	if err != nil {
		t.Fatal(err)
	}
	var encrypted atomic.Int32
	t.Run("each", func(t *testing.T) {
		for _, file := range files {
			t.Run(strings.TrimSuffix(strings.TrimPrefix(file, "testdata/"), ".json.gz"), func(t *testing.T) {
				t.Parallel()
				text := readHistory(t, file)
				id := recordedWorkflowID(file)
				if strings.Contains(text, `"encryption-key-id"`) {
					encrypted.Add(1)
				} else {
					replay(t, text, id, sdkworker.WorkflowReplayerOptions{})
				}
				dc, fc := codec.Converters(nil, keys)
				replay(t, text, id, sdkworker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc})
			})
		}
	})
	if encrypted.Load() == 0 {
		t.Error("no encrypted history was replayed")
	}
}

// readHistory reads a recorded history's JSON.
func readHistory(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return string(text)
}

// recordedWorkflowID is the ID of the workflow whose history file is: its name, as
// testenv.ExportHistories writes it. A history holds no workflow ID of its own, and a
// replayer left to make one up ("ReplayId") names children after it, which the history's
// children, named after the real ID, do not match.
func recordedWorkflowID(file string) string {
	name := strings.TrimSuffix(filepath.Base(file), ".json.gz")
	name, _, _ = strings.Cut(name, "_previous-run-")
	return strings.ReplaceAll(name, "_", "/")
}

// replay parses the history anew for each replayer, which may keep what it is given.
func replay(t *testing.T, text, workflowID string, opts sdkworker.WorkflowReplayerOptions) {
	t.Helper()
	hist, err := client.HistoryFromJSON(strings.NewReader(text), client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts.DisableDeadlockDetection = true
	replayer, err := sdkworker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	worker.RegisterWorkflows(replayer)
	err = replayer.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist,
		sdkworker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: workflowID}})
	if err != nil {
		t.Fatal(err)
	}
}
