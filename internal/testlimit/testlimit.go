// Package testlimit bounds tests: Poll waits for a condition with a deadline, and Guard
// fails the whole test binary when one test runs too long, instead of leaving it to hang
// until `go test -timeout` or CI's own limit. It has no dependencies, so unit tests of the
// small packages can use it without linking the Temporal server.
package testlimit

import (
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLimit is how long one test may run, its cleanups included, before Guard ends the
// test binary, and the most a guard may allow in the suite: a test that needs longer is a
// benchmark, and belongs in bench/. The slowest end-to-end test takes about a minute on
// an idle machine.
const TestLimit = 3 * time.Minute

// BenchEnv, set in the environment, says the tests run on purpose from a bench script, at
// sizes the suite does not run (internal/e2e's size matrix at the sizes its cases were
// found at), so a guard may allow more than TestLimit.
const BenchEnv = "CLUSTERFLOW_BENCH"

// Benching says BenchEnv is set.
func Benching() bool { return os.Getenv(BenchEnv) != "" }

// Poll calls cond every 20 ms until it holds, and fails the test when limit passes first.
func Poll(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Guard ends the test binary, failing it, when the test is still running limit from now:
// it prints which test overran and every goroutine's stack, runs the abort hooks so that no
// process the tests started outlives them, and exits with status 1. Call it first thing in
// a test (after t.Parallel, whose wait should not count), so its timer is stopped only by
// the last cleanup.
//
// A limit past TestLimit fails the test at once, unless Benching: it would let the suite
// grow past what CI can run.
func Guard(t testing.TB, limit time.Duration) {
	if limit > TestLimit && !Benching() {
		t.Fatalf("the guard allows %s, past the suite's budget of %s a test: a test that needs longer belongs in bench/ (%s=1)", limit, TestLimit, BenchEnv)
	}
	name := t.Name()
	timer := time.AfterFunc(limit, func() { abort(name, limit) })
	t.Cleanup(func() { timer.Stop() })
}

var (
	hooksMu sync.Mutex
	hooks   = map[int]func(){}
	nextID  int
	// aborting keeps two overrunning tests from both running the hooks.
	aborting sync.Once
)

// OnAbort registers fn to run if Guard ends the binary (the test's own cleanups will not
// run then); for stopping detached processes, which would otherwise outlive the tests. The
// returned func unregisters it.
func OnAbort(fn func()) (unregister func()) {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	id := nextID
	nextID++
	hooks[id] = fn
	return func() {
		hooksMu.Lock()
		defer hooksMu.Unlock()
		delete(hooks, id)
	}
}

// goroutinesOf picks from a goroutine dump (debug=2) the goroutines running the test's
// function or a closure of it; a subtest runs in its top-level test's function.
func goroutinesOf(test, dump string) string {
	top, _, _ := strings.Cut(test, "/")
	var picked []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "."+top+"(") || strings.Contains(g, "."+top+".") {
			picked = append(picked, g)
		}
	}
	if len(picked) == 0 {
		return "(none: the test's function has returned, and its cleanups or another goroutine hold it)"
	}
	return strings.Join(picked, "\n\n")
}

func abort(test string, limit time.Duration) {
	aborting.Do(func() {
		fmt.Fprintf(os.Stderr, "\n--- FAIL: %s is still running after %s; stopping the test binary (testlimit.Guard)\n\ngoroutines:\n", test, limit)
		var dump bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 2)
		_, _ = os.Stderr.Write(dump.Bytes())
		hooksMu.Lock()
		ids := make([]int, 0, len(hooks))
		for id := range hooks {
			ids = append(ids, id)
		}
		fns := make([]func(), 0, len(ids))
		slices.Sort(ids)
		for _, id := range slices.Backward(ids) { // newest first, like cleanups
			fns = append(fns, hooks[id])
		}
		hooksMu.Unlock()
		done := make(chan struct{})
		go func() {
			for _, fn := range fns {
				fn()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "testlimit: abort hooks did not finish within 30s")
		}
		// CI shows the end of the output, which the whole dump pushes out of sight: the
		// overrunning test's own goroutines, last, say where it waits.
		fmt.Fprintf(os.Stderr, "\n--- where %s waits (its goroutines, from the dump above):\n\n%s\n", test, goroutinesOf(test, dump.String()))
		fmt.Fprintf(os.Stderr, "FAIL\t%s ran past %s\n", test, limit)
		os.Exit(1)
	})
}
