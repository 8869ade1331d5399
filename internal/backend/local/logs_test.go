package local

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
)

// Reading a member's logs never waits on a FIFO its script put at a log's name, nor reads
// a file outside the sandbox through a hard link there: both read as no output.
func TestReadingLogsRefusesAPlantedFIFOOrHardLink(t *testing.T) {
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := backend.MemberRef{Cluster: "c", Role: "m", Name: "c-m-0"}
	dir, err := l.memberDir(m)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := layout.Output("configure")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(stdout)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, stdout), 0o666); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(dir, stderr)); err != nil {
		t.Fatal(err)
	}
	read := make(chan backend.LogChunk, 1)
	go func() {
		chunk, err := l.ReadLog(context.Background(), backend.LogRequest{Member: m, Event: "configure", StdoutOffset: -1, StderrOffset: -1})
		if err != nil {
			t.Error(err)
		}
		read <- chunk
	}()
	select {
	case chunk := <-read:
		if chunk.Stdout != "" || chunk.Stderr != "" {
			t.Errorf("read %q and %q through a FIFO and a hard link", chunk.Stdout, chunk.Stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO at a log's name held the read for 10 s")
	}
}
