package backend

import (
	"github.com/clusterflow/clusterflow/spec"
)

// LogRequest asks for part of a member's script output for one event.
type LogRequest struct {
	Member MemberRef  `json:"member"`
	Event  spec.Event `json:"event"`
	// Offsets are where the previous read of each stream stopped; Limit bounds each
	// stream's bytes returned (the last Limit bytes when the offset is negative).
	StdoutOffset int64 `json:"stdoutOffset"`
	StderrOffset int64 `json:"stderrOffset"`
	Limit        int   `json:"limit"`
}

// LogChunk is what a LogRequest read, with the offsets to ask from next.
type LogChunk struct {
	Stdout       string `json:"stdout,omitempty"`
	Stderr       string `json:"stderr,omitempty"`
	StdoutOffset int64  `json:"stdoutOffset"`
	StderrOffset int64  `json:"stderrOffset"`
	// Missing says the member has no output for the event on this backend.
	Missing bool `json:"missing,omitempty"`
}

// MaxLogRead bounds the bytes of each stream one log read returns.
const MaxLogRead = 512 << 10
