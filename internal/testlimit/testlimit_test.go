package testlimit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Poll(t, "three calls", time.Second, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

// The guard must stop a test that hangs, run the abort hooks, and fail the binary. The
// hanging test runs in a child test binary, selected by an environment variable.
func TestGuardStopsAHangingTestAndRunsTheAbortHooks(t *testing.T) {
	if os.Getenv("TESTLIMIT_HANG") != "" {
		OnAbort(func() { os.WriteFile(os.Getenv("TESTLIMIT_HANG"), []byte("hook ran"), 0o644) })
		Guard(t, 200*time.Millisecond)
		select {} // hangs; only the guard ends it
	}
	Guard(t, TestLimit)
	marker := t.TempDir() + "/hook"
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardStopsAHangingTestAndRunsTheAbortHooks$", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), "TESTLIMIT_HANG="+marker)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("want exit status 1 from the guard, got %v:\n%s", err, out)
	}
	for _, want := range []string{"--- FAIL: TestGuardStopsAHangingTestAndRunsTheAbortHooks is still running after 200ms", "goroutine"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// After the whole dump, at the end CI shows, the hanging test's own goroutine.
	_, tail, _ := strings.Cut(string(out), "--- where TestGuardStopsAHangingTestAndRunsTheAbortHooks waits")
	if !strings.Contains(tail, "testlimit.TestGuardStopsAHangingTestAndRunsTheAbortHooks(") || !strings.Contains(tail, "testlimit_test.go:") || strings.Contains(tail, "runtime/pprof") {
		t.Errorf("the end of the output does not show the hanging test's goroutine alone:\n%s", tail)
	}
	if got, _ := os.ReadFile(marker); string(got) != "hook ran" {
		t.Errorf("abort hook did not run: %q", got)
	}
}

func TestAGuardedTestThatFinishesInTimeIsLeftAlone(t *testing.T) {
	// Cleanups run last-registered first, so this one runs after the guard's has stopped its
	// timer; had it not stopped it, the binary would exit here.
	t.Cleanup(func() { time.Sleep(150 * time.Millisecond) })
	Guard(t, 100*time.Millisecond)
	time.Sleep(10 * time.Millisecond)
}

// A guard past the suite's budget fails its test, which a bench script may lift. The test
// runs in a child test binary, so that its failure is what is checked.
func TestAGuardPastTheBudgetFailsItsTestOutsideBenches(t *testing.T) {
	if os.Getenv("TESTLIMIT_OVER_BUDGET") != "" {
		Guard(t, TestLimit+time.Second)
		return
	}
	Guard(t, TestLimit)
	child := func(env ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAGuardPastTheBudgetFailsItsTestOutsideBenches$", "-test.timeout=1m")
		cmd.Env = append(os.Environ(), append(env, "TESTLIMIT_OVER_BUDGET=1")...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := child(BenchEnv + "=")
	if err == nil || !strings.Contains(out, "past the suite's budget of 3m0s") {
		t.Errorf("a guard of 3m1s should fail its test in the suite; got %v:\n%s", err, out)
	}
	if out, err := child(BenchEnv + "=1"); err != nil {
		t.Errorf("a bench may guard a test for longer; got %v:\n%s", err, out)
	}
}
