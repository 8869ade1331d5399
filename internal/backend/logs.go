package backend

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/spec"
)

// LogRequest asks for part of a member's script output for one event.
type LogRequest struct {
	Member Member     `json:"member"`
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

// ReadLog reads a member's script output for one event, from the offsets asked.
func (l *Local) ReadLog(_ context.Context, req LogRequest) (LogChunk, error) {
	dir, err := l.memberDir(req.Member)
	if err != nil {
		return LogChunk{}, err
	}
	stdout, stderr, err := layout.Output(string(req.Event))
	if err != nil {
		return LogChunk{}, err
	}
	// A read's answer is an activity result: it must stay far below Temporal's 2 MiB.
	if req.Limit <= 0 || req.Limit > MaxLogRead {
		req.Limit = MaxLogRead
	}
	// The sandbox is its script user's, who may have put links in it: the output is read
	// through its root, so none leads the worker's read out of it.
	sandbox, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return LogChunk{Missing: true}, nil
	}
	if err != nil {
		return LogChunk{}, err
	}
	defer sandbox.Close()
	var chunk LogChunk
	var missing [2]bool
	chunk.Stdout, chunk.StdoutOffset, missing[0], err = readFrom(sandbox, stdout, req.StdoutOffset, req.Limit)
	if err != nil {
		return LogChunk{}, err
	}
	chunk.Stderr, chunk.StderrOffset, missing[1], err = readFrom(sandbox, stderr, req.StderrOffset, req.Limit)
	if err != nil {
		return LogChunk{}, err
	}
	chunk.Missing = missing[0] && missing[1]
	return chunk, nil
}

// readFrom reads up to limit bytes of path from offset, or its last limit bytes when offset
// is negative, and returns them with the offset to read from next.
func readFrom(sandbox *os.Root, name string, offset int64, limit int) (text string, next int64, missing bool, err error) {
	f, err := sandbox.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", max(offset, 0), true, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", 0, false, err
	}
	size := info.Size()
	if offset < 0 {
		offset = max(size-int64(limit), 0)
	}
	if offset > size { // the file was started again (a re-run): read it from the start
		offset = 0
	}
	buf := make([]byte, min(int64(limit), size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", 0, false, err
	}
	return string(buf[:n]), offset + int64(n), false, nil
}
