package e2e

import (
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
