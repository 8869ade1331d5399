package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// healthSpec is resizableSpec with a replaceAfter for the workers.
func healthSpec(name, replaceAfter string) string {
	return fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold-controller}}
  - {name: worker, cardinality: "1+", members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller, HOLD: TRACE_FILE.hold}, replaceAfter: %s}
`, name, replaceAfter)
}

// workerNames lists a role's members, with what they replace: "x-worker-2<x-worker-1".
func workerNames(s workflows.ClusterStatus) []string {
	var names []string
	for _, m := range s.Role("worker").Members {
		name := m.Name + "=" + string(m.State)
		if m.Replaces != "" {
			name += "<" + m.Replaces
		}
		names = append(names, name)
	}
	return names
}

func waitForWorkers(t *testing.T, name string, want ...string) workflows.ClusterStatus {
	t.Helper()
	var s workflows.ClusterStatus
	waitFor(t, fmt.Sprintf("workers %v, and a stable phase", want), func() bool {
		s = statusJSON(t, name)
		return slices.Equal(workerNames(s), want) && s.Phase.Stable()
	})
	return s
}

func TestADownMemberIsReplacedAfterReplaceAfter(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "replaced"
	specPath, trace := writeCluster(t, healthSpec(n, "6s")) // time to look at it while down
	mustSucceed(t, "deploy", "-f", specPath, "--wait")

	res := cli(t, "signal", n, n+"-worker-1", "down", "--reason", "disk full", "--source", "prometheus")
	if res.Code != 0 || !strings.Contains(res.Stdout, n+"-worker-1: ready → down") {
		t.Fatalf("signal down: %s", res)
	}
	s := statusJSON(t, n)
	if m := s.Role("worker").Member(n + "-worker-1"); m.State != workflows.MemberDown || s.Phase != workflows.PhaseDegraded {
		t.Errorf("after down: phase %s, %s %s", s.Phase, m.Name, m.State)
	}
	if table := cli(t, "status", n); !strings.Contains(table.Stdout, "ready → down on down: disk full (from prometheus)") {
		t.Errorf("status does not show the transition with its reason and source:\n%s", table.Stdout)
	}

	s = waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-2=ready<"+n+"-worker-1")
	if s.Phase != workflows.PhaseReady || s.Generation != 2 || s.ReachedGeneration != 2 {
		t.Errorf("after the replacement: phase %s (%s), generation %d reached %d", s.Phase, s.Message, s.Generation, s.ReachedGeneration)
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "--configure", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2")
	expectRuns(t, runs, "teardown", "--teardown", n+"-worker-1")
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes "+n+"-worker-2", n+"-controller-0", n+"-worker-0")
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes "+n+"-worker-1", n+"-controller-0", n+"-worker-0")
	successor, teardown := runsOf(runs, n+"-worker-2", "configure"), runsOf(runs, "", "teardown")
	if len(successor) == 1 && len(teardown) == 1 && teardown[0].Start < successor[0].End {
		t.Error("the replaced member was torn down before its successor was set up")
	}
	if exists(filepath.Join(clusterDir(dataDir, n), n+"-worker-1")) {
		t.Error("the replaced member's sandbox is still there")
	}
	mustSucceed(t, "delete", n, "--wait")
}

func TestDownUpKeepsAMemberGoneReplacesAtOnceAndResumeLiftsAMeltdown(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "health"
	specPath, trace := writeCluster(t, healthSpec(n, "10m"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")

	// Refused by name, with exit status 2, changing nothing.
	for _, tc := range []struct{ args, want []string }{
		{[]string{"signal", n, n + "-worker-9", "down"}, []string{`cluster health has no member "health-worker-9"`, "health-worker-0"}},
		{[]string{"signal", n, n + "-worker-0", "sideways"}, []string{`event "sideways" is not one of down, up, gone, unhealthy`}},
		{[]string{"signal", "no-such-cluster", "x-worker-0", "down"}, []string{"no-such-cluster"}},
		{[]string{"resume", n}, []string{"nothing to resume"}},
	} {
		res := cli(t, tc.args...)
		for _, want := range tc.want {
			if res.Code != 2 || !strings.Contains(res.Stderr, want) {
				t.Errorf("%v: want exit 2 naming %q, got %s", tc.args, want, res)
			}
		}
	}

	// The plain signal, as a health checker in any language sends it: one about an unknown
	// member is dropped, and the workflow carries on.
	st := starter.New(server.Client, "")
	ctx := context.Background()
	for _, ev := range []workflows.MemberEvent{
		{Member: n + "-worker-9", Event: workflows.HealthGone},
		{Member: n + "-worker-0", Event: "sideways"},
		{Member: n + "-worker-0", Event: workflows.HealthDown, Reason: "probe failed", Source: "checker", At: time.Now()},
	} {
		if err := st.SignalMemberEvent(ctx, n, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the signalled down", func() bool {
		s := statusJSON(t, n)
		return s.Role("worker").Member(n+"-worker-0").State == workflows.MemberDown
	})
	mustSucceed(t, "signal", n, n+"-worker-0", "up", "--reason", "back")
	s := statusJSON(t, n)
	if m := s.Role("worker").Member(n + "-worker-0"); m.State != workflows.MemberReady || len(m.Health.Transitions) != 2 || s.Phase != workflows.PhaseReady || s.Generation != 1 {
		t.Errorf("after down and up: phase %s, generation %d, %+v", s.Phase, s.Generation, m)
	}
	if tr := s.Role("worker").Member(n + "-worker-0").Health.Transitions; len(tr) == 2 && (tr[0].Source != "checker" || tr[0].Reason != "probe failed" || tr[0].ReportedAt.IsZero() || tr[1].Source != "cli") {
		t.Errorf("transitions %+v", tr)
	}

	mustSucceed(t, "signal", n, n+"-worker-0", "gone", "--reason", "instance terminated")
	waitForWorkers(t, n, n+"-worker-1=ready", n+"-worker-2=ready<"+n+"-worker-0")
	runs := readTrace(t, trace)
	expectRuns(t, runs, "teardown", "") // gone: nothing left to run a teardown in
	expectRuns(t, runs, "configure", "--configure", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2")

	// Both workers down at once is more than the 50% the role allows: replacement pauses.
	mustSucceed(t, "signal", n, n+"-worker-1", "down")
	mustSucceed(t, "signal", n, n+"-worker-2", "gone")
	s = statusJSON(t, n)
	if s.Phase != workflows.PhasePaused || !strings.Contains(s.Message, "2 of 2 members unavailable") || len(s.Role("worker").Members) != 2 {
		t.Fatalf("want paused, no replacement: phase %s (%s), workers %v", s.Phase, s.Message, workerNames(s))
	}
	// Resuming replaces the gone member now; the down one keeps its 10m replaceAfter.
	res := cli(t, "resume", n)
	if res.Code != 0 || !strings.Contains(res.Stdout, "Resumed automatic replacement of worker") {
		t.Fatalf("resume: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-1=down", n+"-worker-3=ready<"+n+"-worker-2")
	mustSucceed(t, "signal", n, n+"-worker-1", "up")
	if s := statusJSON(t, n); s.Phase != workflows.PhaseReady {
		t.Errorf("all up again: phase %s (%s)", s.Phase, s.Message)
	}
	mustSucceed(t, "delete", n, "--wait")
}

// A sandbox made behind clusterflow's back, named like a member, is removed on reconcile;
// so is one of a role the cluster does not have.
func TestReconcileRemovesAnOrphanSandbox(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "orphans"
	specPath, trace := writeCluster(t, healthSpec(n, "10m"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	folder := clusterDir(dataDir, n)
	orphans := []string{n + "-worker-9", n + "-ghost-0"}
	for _, orphan := range orphans {
		if err := os.MkdirAll(filepath.Join(folder, orphan, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res := cli(t, "reconcile", n)
	if res.Code != 0 || !strings.Contains(res.Stdout, "Removing members clusterflow did not know: "+strings.Join(orphans, ", ")) &&
		!strings.Contains(res.Stdout, "Removing members clusterflow did not know: "+orphans[1]+", "+orphans[0]) {
		t.Fatalf("reconcile: %s", res)
	}
	// Reconcile made removing them a new generation: wait until it is reached, then look at
	// the final status (progress lines along the way name the orphans being removed).
	removal := statusJSON(t, n).Generation
	var s workflows.ClusterStatus
	waitFor(t, fmt.Sprintf("generation %d, which removes the orphans, to be reached", removal), func() bool {
		s = statusJSON(t, n)
		return s.ReachedGeneration >= removal && s.Phase.Stable()
	})
	if !slices.Equal(workerNames(s), []string{n + "-worker-0=ready", n + "-worker-1=ready"}) || s.Role("ghost") != nil || s.Phase != workflows.PhaseReady {
		t.Errorf("after the orphans' removal: phase %s, workers %v, roles %d", s.Phase, workerNames(s), len(s.Roles))
	}
	if exists(filepath.Join(folder, orphans[0])) || exists(filepath.Join(folder, orphans[1])) {
		t.Error("an orphan's sandbox is still there")
	}
	if res := cli(t, "status", n); res.Code != 0 || strings.Contains(res.Stdout, "ghost") || strings.Contains(res.Stdout, "worker-9") {
		t.Errorf("status after reconcile: %s", res)
	}
	// The orphan of a known role was torn down with its script; no member was told of it.
	runs := readTrace(t, trace)
	expectRuns(t, runs, "teardown", "--teardown", n+"-worker-9")
	expectRuns(t, runs, "delnodes", "")
	if res := cli(t, "reconcile", n); res.Code != 0 || !strings.Contains(res.Stdout, "Nothing to do") {
		t.Errorf("second reconcile: %s", res)
	}

	// A member whose sandbox disappears is gone, and replaced.
	if err := os.RemoveAll(filepath.Join(folder, n+"-worker-0")); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, "reconcile", n); res.Code != 0 || !strings.Contains(res.Stdout, "Gone from the backend, so treated as gone: "+n+"-worker-0.") {
		t.Fatalf("reconcile after a sandbox vanished: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-1=ready", n+"-worker-2=ready<"+n+"-worker-0")
	mustSucceed(t, "delete", n, "--wait")
}

// A member that keeps coming back is left alone, and status says why, until resumed.
func TestAFlappingMemberIsNotReplacedUntilResumed(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "flapper"
	specPath, _ := writeCluster(t, strings.Replace(healthSpec(n, "2s"), "replaceAfter: 2s", "replaceAfter: 2s, flapLimit: 1, flapWindow: 10m", 1))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	m := n + "-worker-0"
	mustSucceed(t, "signal", n, m, "down")
	mustSucceed(t, "signal", n, m, "up")
	mustSucceed(t, "signal", n, m, "down")
	if res := cli(t, "signal", n, m, "up"); res.Code != 0 || !strings.Contains(res.Stdout, m+": down → flapping") {
		t.Fatalf("second recovery: %s", res)
	}
	mustSucceed(t, "signal", n, m, "down")
	time.Sleep(3 * time.Second) // past replaceAfter: a member not flapping would be replaced now
	res := cli(t, "status", n)
	if !strings.Contains(res.Stdout, "flapping: came back up 2 times within 10m0s (flapLimit 1), so it is not replaced automatically") {
		t.Errorf("status does not say why the member is left alone:\n%s", res.Stdout)
	}
	if s := statusJSON(t, n); !slices.Equal(workerNames(s), []string{m + "=flapping", n + "-worker-1=ready"}) || s.Phase != workflows.PhaseDegraded {
		t.Errorf("phase %s, workers %v", s.Phase, workerNames(s))
	}
	// Resumed while down, it is down again, with a fresh replaceAfter.
	if res := cli(t, "resume", n); res.Code != 0 || !strings.Contains(res.Stdout, "No longer flapping: "+m) {
		t.Fatalf("resume: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-1=ready", n+"-worker-2=ready<"+m)
	mustSucceed(t, "delete", n, "--wait")
}

func TestAFailedSetupIsReplacedWhenTheRoleAsks(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "reconfigured"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: %[1]s-worker-1}, replaceOnConfigError: true, maxReplacements: 1}
  - {name: edge, members: 1, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: worker}}
`, n))
	if res := cli(t, "deploy", "-f", specPath, "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	s := statusJSON(t, n)
	if !slices.Equal(workerNames(s), []string{n + "-worker-0=ready", n + "-worker-2=ready<" + n + "-worker-1"}) || s.Phase != workflows.PhaseReady {
		t.Errorf("phase %s (%s), workers %v", s.Phase, s.Message, workerNames(s))
	}
	runs := readTrace(t, trace)
	// The edge waited for the replacement: dependencies hold.
	edge, successor := runsOf(runs, n+"-edge-0", "configure"), runsOf(runs, n+"-worker-2", "configure")
	if len(edge) != 1 || len(successor) != 1 || edge[0].Start < successor[0].End {
		t.Errorf("the edge did not wait for the replacement worker: %+v", runs)
	}
	expectRuns(t, runs, "teardown", "--teardown", n+"-worker-1")
	mustSucceed(t, "delete", n, "--wait")
}

func TestAReplacementSurvivesItsWorkerBeingKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	n := "rereplaced"
	specPath, trace := writeCluster(t, healthSpec(n, "10m"))
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	hold := trace + ".hold"
	holdOn(t, hold)
	if res := s.cli("signal", n, n+"-worker-1", "gone"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	waitFor(t, "the successor's configure to start", func() bool { return len(runsOf(readTrace(t, trace), n+"-worker-2", "configure")) == 1 })
	s.kill(s.worker)
	release(t, hold)
	s.startWorker()
	waitFor(t, "the replacement to finish", func() bool {
		var status workflows.ClusterStatus
		res := s.cli("status", n, "-o", "json")
		return res.Code == 0 && json.Unmarshal([]byte(res.Stdout), &status) == nil && status.Phase == workflows.PhaseReady &&
			slices.Equal(workerNames(status), []string{n + "-worker-0=ready", n + "-worker-2=ready<" + n + "-worker-1"})
	})
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "--configure", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2")
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes "+n+"-worker-2", n+"-controller-0", n+"-worker-0")
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes "+n+"-worker-1", n+"-controller-0", n+"-worker-0")
	expectRuns(t, runs, "teardown", "")
	if exists(filepath.Join(clusterDir(s.data, n), n+"-worker-1")) || !exists(filepath.Join(clusterDir(s.data, n), n+"-worker-2")) {
		t.Error("sandboxes do not match the members")
	}
}
