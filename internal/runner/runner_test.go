package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func script(t *testing.T, body string) Command {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return Command{
		Path: path, Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH")},
		StdoutFile: filepath.Join(dir, "out"), StderrFile: filepath.Join(dir, "err"),
		Timeout: time.Minute, Grace: 5 * time.Second,
	}
}

func TestRunReportsExitAndTails(t *testing.T) {
	c := script(t, "echo first; echo oops >&2; exit 3\n")
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Exited || res.ExitCode != 3 || res.StdoutTail != "first\n" || res.StderrTail != "oops\n" {
		t.Errorf("unexpected result %+v", res)
	}
	// A second run appends to the logs, but its tails hold only its own output.
	res, _ = Run(context.Background(), c)
	if res.StdoutTail != "first\n" {
		t.Errorf("tail mixes runs: %q", res.StdoutTail)
	}
	if data, _ := os.ReadFile(c.StdoutFile); string(data) != "first\nfirst\n" {
		t.Errorf("log not appended: %q", data)
	}
}

func TestRunKeepsOnlyTheTail(t *testing.T) {
	c := script(t, "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done\n")
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StdoutTail) > TailSize || !strings.HasPrefix(res.StdoutTail, "line") || !strings.HasSuffix(res.StdoutTail, "line1999\n") {
		t.Errorf("bad tail (%d bytes): %q...", len(res.StdoutTail), res.StdoutTail[:20])
	}
}

func TestRunTimeoutKillsTheWholeGroup(t *testing.T) {
	c := script(t, "sleep 60 & echo $! > child.pid; trap '' TERM; sleep 60\n")
	c.Timeout, c.Grace = 300*time.Millisecond, 200*time.Millisecond
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != TimedOut || res.ExitCode == 0 {
		t.Errorf("want a timed-out result, got %+v", res)
	}
	assertGone(t, filepath.Join(c.Dir, "child.pid"))
}

func TestRunCancelStopsTheScript(t *testing.T) {
	c := script(t, "sleep 60 & echo $! > child.pid; echo started; wait\n")
	var mu sync.Mutex
	var seen []Progress
	ctx := cancelWhenStarted(&c, func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, p)
	})
	res, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Canceled {
		t.Errorf("want canceled, got %+v", res)
	}
	if len(seen) == 0 || seen[len(seen)-1].LastLine != "started" {
		t.Errorf("progress did not show the last line: %+v", seen)
	}
	assertGone(t, filepath.Join(c.Dir, "child.pid"))
}

func TestRunFailsWhenTheScriptCannotStart(t *testing.T) {
	c := script(t, "")
	c.Path = filepath.Join(c.Dir, "missing")
	if _, err := Run(context.Background(), c); err == nil {
		t.Error("want an error for a missing script")
	}
}

// cancelWhenStarted returns a context cancelled once the script prints "started", as seen
// through its progress reports, which are also passed to observe.
func cancelWhenStarted(c *Command, observe func(Progress)) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	c.ProgressEvery = 20 * time.Millisecond
	c.OnProgress = func(p Progress) {
		if observe != nil {
			observe(p)
		}
		if p.LastLine == "started" {
			cancel()
		}
	}
	return ctx
}

func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		// A zombie is gone for every practical purpose; check it is not still running.
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if !strings.Contains(string(stat), ") Z ") {
			t.Errorf("child %d still running after the group was stopped: %s", pid, stat)
		}
	}
}

func TestStopGivesChildrenTheirGracePeriod(t *testing.T) {
	// The child needs a moment after SIGTERM to finish up; the script itself exits at once.
	c := script(t, `sh -c 'trap "sleep 0.3; echo cleaned > cleaned; exit 0" TERM; while :; do sleep 0.05; done' &
echo $! > child.pid
echo started
wait
`)
	c.Grace = 5 * time.Second
	ctx := cancelWhenStarted(&c, nil)
	res, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Canceled {
		t.Errorf("want canceled, got %+v", res)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "cleaned")); err != nil {
		t.Errorf("the child was killed before its grace period was over: %v", err)
	}
	assertGone(t, filepath.Join(c.Dir, "child.pid"))
}
