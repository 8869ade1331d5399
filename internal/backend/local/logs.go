package local

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// ReadLog reads a member's script output for one event, from the offsets asked.
func (l *Backend) ReadLog(_ context.Context, req backend.LogRequest) (backend.LogChunk, error) {
	dir, err := l.memberDir(req.Member)
	if err != nil {
		return backend.LogChunk{}, err
	}
	stdout, stderr, err := layout.Output(string(req.Event))
	if err != nil {
		return backend.LogChunk{}, err
	}
	// A read's answer is an activity result: it must stay far below Temporal's 2 MiB.
	if req.Limit <= 0 || req.Limit > backend.MaxLogRead {
		req.Limit = backend.MaxLogRead
	}
	// The sandbox is its script user's, who may have put links in it: the output is read
	// through its root, so none leads the worker's read out of it.
	sandbox, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return backend.LogChunk{Missing: true}, nil
	}
	if err != nil {
		return backend.LogChunk{}, err
	}
	defer sandbox.Close()
	var chunk backend.LogChunk
	var missing [2]bool
	chunk.Stdout, chunk.StdoutOffset, missing[0], err = readFrom(sandbox, stdout, req.StdoutOffset, req.Limit)
	if err != nil {
		return backend.LogChunk{}, err
	}
	chunk.Stderr, chunk.StderrOffset, missing[1], err = readFrom(sandbox, stderr, req.StderrOffset, req.Limit)
	if err != nil {
		return backend.LogChunk{}, err
	}
	chunk.Missing = missing[0] && missing[1]
	return chunk, nil
}

// readFrom reads up to limit bytes of path from offset, or its last limit bytes when offset
// is negative, and returns them with the offset to read from next.
func readFrom(sandbox *os.Root, name string, offset int64, limit int) (text string, next int64, missing bool, err error) {
	// Never a FIFO (which would hold this read for as long as the script likes) nor a
	// hard link to a file outside the sandbox: see runner.OpenScriptFile.
	f, err := runner.OpenScriptFile(sandbox, name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, runner.ErrNotScriptFile) {
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
