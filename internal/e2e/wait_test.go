package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitFor polls cond for up to a minute; it is for things that happen in other processes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUpTo(t, time.Minute, what, cond)
}

// waitUpTo polls cond for up to limit.
func waitUpTo(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterDir is the folder of the cluster of that name in a data folder: NAME@HOME, or
// NAME for a cluster of before homes; the newest, should a test have made several. A name
// with no folder gives a path that does not exist.
func clusterDir(data, name string) string {
	matches, _ := filepath.Glob(filepath.Join(data, "clusters", name+"@*"))
	if legacy := filepath.Join(data, "clusters", name); exists(legacy) {
		matches = append(matches, legacy)
	}
	if len(matches) == 0 {
		return filepath.Join(data, "clusters", name+"@none")
	}
	newest, newestTime := matches[0], time.Time{}
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil && info.ModTime().After(newestTime) {
			newest, newestTime = m, info.ModTime()
		}
	}
	return newest
}
