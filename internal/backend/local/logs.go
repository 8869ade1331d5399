package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
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
	if err := l.refuseElsewhere(req.Member.Folder()); err != nil {
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
		// A removed member: its output, if this host kept it (keepRemovedLogs).
		removed, rerr := l.removedLogsDir(req.Member.Folder())
		if rerr != nil {
			return backend.LogChunk{}, rerr
		}
		sandbox, err = os.OpenRoot(filepath.Join(removed, req.Member.Name))
	}
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

// keptRemovedLogs is how many removed members' output a host keeps per cluster, until the
// cluster is removed: enough for `clusterflow logs` to show why a shrink's or a
// replacement's teardown failed.
const keptRemovedLogs = 16

// removedLogsDir holds the output of a cluster's removed members, a folder each.
func (l *Backend) removedLogsDir(c layout.Cluster) (string, error) {
	dir, err := l.layout.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "removed"), nil
}

// keepRemovedLogs moves a member's logs out of its sandbox before the sandbox goes, and
// drops the oldest kept beyond keptRemovedLogs. The files become the host's: a later
// cluster given the same script user must not own them.
func (l *Backend) keepRemovedLogs(m backend.MemberRef, sandbox string) error {
	removed, err := l.removedLogsDir(m.Folder())
	if err != nil {
		return err
	}
	// One removal at a time keeps and prunes: another's pruning must not take the folder
	// this one has just made before its logs are in it, nor a removal of the same member
	// asked twice at once move them from under the other. (A rename and a listing of at
	// most keptRemovedLogs+1 entries: cheap enough to share one lock across clusters.)
	l.removedLogs.Lock()
	defer l.removedLogs.Unlock()
	logs := filepath.Join(sandbox, layout.LogsDir)
	if info, err := os.Lstat(logs); err != nil || !info.IsDir() {
		return nil // nothing ran, or the script put something else there: nothing to keep
	}
	kept := filepath.Join(removed, m.Name)
	if err := os.RemoveAll(kept); err != nil {
		return err
	}
	if err := os.MkdirAll(kept, 0o700); err != nil {
		return err
	}
	if err := os.Rename(logs, filepath.Join(kept, layout.LogsDir)); err != nil {
		return fmt.Errorf("keep the output of %s: %w", m.Name, err)
	}
	if os.Geteuid() == 0 {
		_ = filepath.WalkDir(kept, func(path string, _ fs.DirEntry, err error) error {
			if err == nil {
				err = os.Lchown(path, 0, 0)
			}
			return err
		})
	}
	entries, err := os.ReadDir(removed)
	if err != nil || len(entries) <= keptRemovedLogs {
		return err
	}
	type aged struct {
		name string
		at   time.Time
	}
	var all []aged
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			all = append(all, aged{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b aged) int { return a.at.Compare(b.at) })
	for _, old := range all[:max(len(all)-keptRemovedLogs, 0)] {
		_ = os.RemoveAll(filepath.Join(removed, old.name))
	}
	return nil
}

// DescribeMember implements backend.Describer: where the member lives, how its cluster
// reaches it, and its runs as the agent recorded them.
func (l *Backend) DescribeMember(_ context.Context, m backend.MemberRef) (backend.MemberDescription, error) {
	dir, err := l.memberDir(m)
	if err != nil {
		return backend.MemberDescription{}, err
	}
	if err := l.refuseElsewhere(m.Folder()); err != nil {
		return backend.MemberDescription{}, err
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return backend.MemberDescription{Missing: true}, nil
	}
	records, err := l.layout.Records(m.Folder(), m.Name)
	if err != nil {
		return backend.MemberDescription{}, err
	}
	runs, err := agent.MemberRuns(records)
	if err != nil {
		return backend.MemberDescription{}, err
	}
	return backend.MemberDescription{Dir: dir, Address: l.MemberAddress(m, l.hostAddress()), Runs: runs}, nil
}
