// Package runner starts startscripts as detached process groups that outlive whoever
// started them, and lets any later process find them again: check them, read their exit
// status and output, and stop them.
package runner

import "time"

// Outcome says how a run ended.
type Outcome string

const (
	Exited   Outcome = "exited"
	TimedOut Outcome = "timed_out"
	Canceled Outcome = "canceled"
)

// Result is a finished run.
type Result struct {
	Outcome    Outcome       `json:"outcome"`
	ExitCode   int           `json:"exitCode"`
	Duration   time.Duration `json:"duration"`
	StdoutTail string        `json:"stdoutTail"`
	StderrTail string        `json:"stderrTail"`
}

// TailSize is how much of each output stream a result keeps.
const TailSize = 4 << 10
