package testlimit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run as a child (TESTLIMIT_FAIL set), it fails the way end-to-end tests do: many messages,
// the reason among the last, a multi-line log (a process's output) after it, a failed
// subtest, and a test that passes with messages of its own.
func TestFailingTestsForTheSummary(t *testing.T) {
	if os.Getenv("TESTLIMIT_FAIL") == "" {
		t.Skip("run by TestTheFailureSummaryNamesEachFailedTestAndItsReason as a child")
	}
	t.Run("passes", func(t *testing.T) { t.Log("passing message") })
	t.Run("fails", func(t *testing.T) {
		for i := range 9 {
			t.Logf("step %d", i)
		}
		t.Error("timed out waiting for the reason")
		t.Log("worker output:\n    main.go:1: a log line past the message's first\n    another")
	})
	t.Error(strings.Repeat("long ", 200))
}

func TestTheFailureSummaryNamesEachFailedTestAndItsReason(t *testing.T) {
	Guard(t, TestLimit)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailingTestsForTheSummary$", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), "TESTLIMIT_FAIL=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the failing tests passed:\n%s", out)
	}
	// As `go test` prints it, after the package's output, the package's verdict.
	out = append(out, "FAIL\tgithub.com/clusterflow/clusterflow/internal/testlimit\t0.01s\n"...)
	var summary bytes.Buffer
	if err := WriteFailureSummary(bytes.NewReader(out), &summary); err != nil {
		t.Fatal(err)
	}
	got := summary.String()
	_, sub, _ := strings.Cut(got, "--- FAIL: TestFailingTestsForTheSummary/fails")
	var steps []string
	for i := 6; i < 9; i++ {
		steps = append(steps, fmt.Sprintf("failures_test.go:%d: step %d", 22, i))
	}
	for _, want := range append(steps,
		"--- FAIL: TestFailingTestsForTheSummary (",
		"failures_test.go:24: timed out waiting for the reason",
		"failures_test.go:25: worker output:",
		"failures_test.go:27: long long",
		" …",
		"FAIL\tgithub.com/clusterflow/clusterflow/internal/testlimit") {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"step 2", "passing message", "a log line past", "another", strings.Repeat("long ", 100)} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the summary has %q, which it should leave out:\n%s", unwanted, got)
		}
	}
	if !strings.Contains(sub, "timed out waiting for the reason") {
		t.Errorf("the subtest's reason is not under its own header:\n%s", got)
	}

	// A passing run summarises to nothing; a hung test stopped by the guard is named.
	summary.Reset()
	if err := WriteFailureSummary(strings.NewReader("--- PASS: TestX (0.00s)\n    x_test.go:1: fine\nok\tpkg\t0.1s\n"), &summary); err != nil || summary.Len() != 0 {
		t.Errorf("a passing run summarised to %q (%v)", summary.String(), err)
	}
	summary.Reset()
	hung := "\n--- FAIL: TestHang is still running after 3m0s; stopping the test binary (testlimit.Guard)\n\ngoroutines:\ngoroutine 1 [running]:\n"
	if err := WriteFailureSummary(strings.NewReader(hung), &summary); err != nil || !strings.Contains(summary.String(), "--- FAIL: TestHang is still running after 3m0s") {
		t.Errorf("a hung test summarised to %q (%v)", summary.String(), err)
	}
}
