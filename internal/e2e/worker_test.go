package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

func TestWorkerServesPrometheusMetrics(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: measured
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	defer mustSucceed(t, "delete", "measured", "--wait")
	// Tally reports every second.
	var page string
	waitFor(t, "activity metrics", func() bool {
		page = httpGet(t, metricsURL)
		return strings.Contains(page, "temporal_activity_execution_latency")
	})
	for _, name := range []string{
		// Activities scheduled by a workflow task often start eagerly, on the same worker,
		// so their schedule-to-start latency may not be reported yet; workflow tasks' is.
		"temporal_workflow_task_schedule_to_start_latency", "temporal_worker_task_slots_available",
		"temporal_workflow_completed", "temporal_request", `activity_type="RunStartscript"`, `task_queue="clusterflow"`,
	} {
		if !strings.Contains(page, name) {
			t.Errorf("metrics lack %s; they have:\n%s", name, metricNames(page))
		}
	}
}

func TestWorkerStopsGracefullyOnSIGTERM(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	worker, err := testenv.Start(dir, dir, "worker", cliEnv, "worker", "--data", dataDir, "--shutdown-timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Stop)
	if err := worker.WaitFor("Started Worker", time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, err := worker.Signal(syscall.SIGTERM, 20*time.Second)
	if err != nil || code != 0 {
		t.Fatalf("worker did not stop cleanly on SIGTERM: exit %d, %v\n%s", code, err, worker.Output())
	}
	if err := worker.WaitFor("Worker stopped", time.Second); err != nil {
		t.Error(err)
	}
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
}

func metricNames(page string) string {
	seen := map[string]bool{}
	var names []string
	for _, line := range strings.Split(page, "\n") {
		if name, _, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return strings.Join(names, "\n")
}
