package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// record is what the agent keeps on disk about one run: enough to adopt it after a
// restart and to deliver its result however late.
type record struct {
	Key          Key           `json:"key"`
	TaskToken    []byte        `json:"taskToken"`
	ConnectionID string        `json:"connectionId"`
	Member       string        `json:"member"`
	Event        string        `json:"event"`
	Timeout      time.Duration `json:"timeout"`
	Grace        time.Duration `json:"grace"`
	// HeartbeatTimeout is the activity's (Launch.HeartbeatTimeout).
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
	Started          time.Time     `json:"started"`
	// ProbeID names the member's probe, which the run's success arms (probe.go).
	ProbeID string        `json:"probeId,omitempty"`
	Handle  runner.Handle `json:"handle"`
	// Result is set once the run has ended; Lost when its process vanished without an
	// exit status.
	Result *runner.Result `json:"result,omitempty"`
	Lost   bool           `json:"lost,omitempty"`
}

// runState is where a run is, as its record says: the one reading of Result and Lost.
type runState int

const (
	// runRunning: the script runs (or ran, and the agent has yet to see it end).
	runRunning runState = iota
	// runExited: the script ended with an exit status; its result waits to be delivered.
	runExited
	// runLost: the script's process vanished without an exit status.
	runLost
)

func (r record) state() runState {
	switch {
	case r.Lost:
		return runLost
	case r.Result != nil:
		return runExited
	}
	return runRunning
}

// finished says the run has ended, one way or the other, and only its delivery is left.
func (s runState) finished() bool { return s != runRunning }

const recordFile = "record.json"

func loadRecord(dir string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("run record %s: %w", dir, err)
	}
	return &r, nil
}

func (r *record) save(dir string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, recordFile), data, 0o600)
}

// MemberRuns reads a member's runs from its records folder (layout.Records): the latest
// backend.MaxDescribedRuns, oldest first. The records are what the agent trusts about its
// runs, kept out of the sandbox, for as long as the member lives.
func MemberRuns(records string) ([]backend.RunSummary, error) {
	entries, err := os.ReadDir(records)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []backend.RunSummary
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rec, err := loadRecord(filepath.Join(records, e.Name()))
		if err != nil {
			continue // a launch refused before its record was saved
		}
		runs = append(runs, rec.summary())
	}
	slices.SortFunc(runs, func(a, b backend.RunSummary) int { return a.Started.Compare(b.Started) })
	return runs[max(0, len(runs)-backend.MaxDescribedRuns):], nil
}

// summary is the run as status --member shows it.
func (r record) summary() backend.RunSummary {
	s := backend.RunSummary{Event: r.Event, Started: r.Started, Outcome: "running"}
	switch r.state() {
	case runLost:
		s.Outcome = "lost"
	case runExited:
		s.Outcome, s.ExitCode, s.Duration = string(r.Result.Outcome), r.Result.ExitCode, r.Result.Duration
		if err := ResultError(r.Event, r.Timeout, *r.Result); err != nil {
			failure := err.Error()
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				failure = app.Message() // without the SDK's "(type: …)"
			}
			s.Failure, _, _ = strings.Cut(failure, "\n")
		}
	}
	return s
}
