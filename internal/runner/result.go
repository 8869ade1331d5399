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
	// NotReady: the script exited 0, but its member's check did not pass in time (a
	// ready-after probe).
	NotReady Outcome = "not_ready"
)

// Result is a finished run.
type Result struct {
	Outcome    Outcome       `json:"outcome"`
	ExitCode   int           `json:"exitCode"`
	Duration   time.Duration `json:"duration"`
	StdoutTail string        `json:"stdoutTail"`
	StderrTail string        `json:"stderrTail"`
	// Detail says why a run that is NotReady is not.
	Detail string `json:"detail,omitempty"`
}

// TailSize is how much of each output stream a result keeps.
const TailSize = 4 << 10
