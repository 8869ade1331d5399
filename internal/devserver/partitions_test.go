package devserver

import (
	"os"
	"path/filepath"
	"testing"
)

// A database this version makes has one partition a task queue, and keeps it; one made
// before (no marker) keeps the server's four, whose tasks fewer would strand.
func TestTaskQueuePartitionsStayWhatTheDatabaseWasMadeWith(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new", "dev.db")
	if n, err := taskQueuePartitions(fresh); err != nil || n != 1 {
		t.Fatalf("a new database: %d partitions, %v; want 1", n, err)
	}
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := taskQueuePartitions(fresh); err != nil || n != 1 {
		t.Errorf("the same database again: %d partitions, %v; want 1", n, err)
	}
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := taskQueuePartitions(old); err != nil || n != 4 {
		t.Errorf("a database from before: %d partitions, %v; want 4", n, err)
	}
	if n, err := taskQueuePartitions(""); err != nil || n != 1 {
		t.Errorf("in memory: %d partitions, %v; want 1", n, err)
	}
}
