package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

func threeLevelSpec(name, failMember string) string {
	return fmt.Sprintf(`
name: %s
roles:
  - name: edge
    members: 2
    dependsOn: [worker]
    startscript: trace.sh
    env: {TRACE: TRACE_FILE, DEPS: "controller worker"}
  - name: worker
    members: 3
    maxInFlight: 2
    dependsOn: [controller]
    startscript: trace.sh
    env: {TRACE: TRACE_FILE, DEPS: controller, SLEEP: "0.3", FAIL_MEMBER: "%s"}
  - name: controller
    cardinality: "1"
    startscript: trace.sh
    env: {TRACE: TRACE_FILE, SLEEP: "0.5"}
`, name, failMember)
}

func statusJSON(t *testing.T, name string) workflows.ClusterStatus {
	t.Helper()
	return parseStatus(t, name, cli(t, "status", name, "-o", "json"))
}

// parseStatus reads the output of `status NAME -o json`.
func parseStatus(t *testing.T, name string, res testenv.Result) workflows.ClusterStatus {
	t.Helper()
	if res.Code != 0 {
		t.Fatalf("status %s: %s", name, res)
	}
	var s workflows.ClusterStatus
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, res.Stdout)
	}
	return s
}

func TestDeployRunsRolesInDependencyOrder(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, threeLevelSpec("ordered", ""))
	res := cli(t, "deploy", "-f", specPath, "--wait")
	if res.Code != 0 {
		t.Fatalf("deploy --wait: %s", res)
	}
	if !strings.Contains(res.Stdout, "ordered: ready") {
		t.Errorf("progress did not end in ready:\n%s", res.Stdout)
	}

	runs := readTrace(t, trace)
	controllers, workers, edges := runsOf(runs, "ordered-controller-", "configure"), runsOf(runs, "ordered-worker-", "configure"), runsOf(runs, "ordered-edge-", "configure")
	if len(controllers) != 1 || len(workers) != 3 || len(edges) != 2 || len(runs) != 6 {
		t.Fatalf("want exactly one configure per member, got %+v", runs)
	}
	for _, w := range workers {
		if w.Start < controllers[0].End {
			t.Errorf("%s started at %.3f, before the controller finished at %.3f", w.Member, w.Start, controllers[0].End)
		}
		for _, e := range edges {
			if e.Start < w.End {
				t.Errorf("%s started at %.3f, before %s finished at %.3f", e.Member, e.Start, w.Member, w.End)
			}
		}
	}
	// maxInFlight 2: the third worker waits for one of the first two.
	if overlap := maxOverlap(workers); overlap > 2 {
		t.Errorf("%d workers configured at once, maxInFlight is 2", overlap)
	}

	s := statusJSON(t, "ordered")
	if s.Phase != workflows.PhaseReady || len(s.Roles) != 3 {
		t.Fatalf("status %+v", s)
	}
	for _, r := range s.Roles {
		if r.Ready != r.Desired || len(r.Members) != r.Desired {
			t.Errorf("role %s: %d/%d ready, %d members", r.Name, r.Ready, r.Desired, len(r.Members))
		}
		for i, m := range r.Members {
			if want := fmt.Sprintf("ordered-%s-%d", r.Name, i); m.Name != want || m.State != workflows.MemberReady {
				t.Errorf("member %s (want %s) in state %s", m.Name, want, m.State)
			}
		}
	}
	if dir := filepath.Join(clusterDir(dataDir, "ordered"), "ordered-worker-2"); !exists(dir) {
		t.Errorf("no sandbox at %s", dir)
	}
	human := cli(t, "status", "ordered")
	if human.Code != 0 || !strings.Contains(human.Stdout, "controller → worker → edge") || !strings.Contains(human.Stdout, "ordered-edge-1") {
		t.Errorf("human status:\n%s", human)
	}
}

func TestFailedConfigureShowsOutputAndStopsDependents(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, threeLevelSpec("failing", "failing-worker-1"))
	res := cli(t, "deploy", "-f", specPath, "--wait")
	if res.Code != 1 {
		t.Fatalf("deploy of a failing cluster should exit 1: %s", res)
	}
	if !strings.Contains(res.Stdout, "boom: failing-worker-1 cannot start") || !strings.Contains(res.Stderr, "role worker failed") {
		t.Errorf("failure output lacks the script's stderr or the reason:\n%s", res)
	}
	if edges := runsOf(readTrace(t, trace), "failing-edge-", "configure"); len(edges) != 0 {
		t.Errorf("edge configured although worker failed: %+v", edges)
	}
	s := statusJSON(t, "failing")
	if s.Phase != workflows.PhaseFailed {
		t.Fatalf("phase %s, want failed", s.Phase)
	}
	failed := s.Role("worker").Members[1]
	if failed.State != workflows.MemberConfigError || !strings.Contains(failed.StderrTail, "boom: failing-worker-1 cannot start") ||
		!strings.Contains(failed.StdoutTail, "about to fail") || !strings.Contains(failed.Detail, "exited with status 3") {
		t.Errorf("failed member %+v", failed)
	}
	for _, m := range s.Role("edge").Members {
		if m.State != workflows.MemberPending {
			t.Errorf("edge member %s is %s, want pending", m.Name, m.State)
		}
	}
	// In the Web UI, the failed activity names the member and event, and its details are
	// plain JSON holding the output tails: readable without a codec.
	scheduled := map[int64]string{}
	found := false
	for _, e := range history(t, "cluster/failing/configure-1/worker") {
		if e.GetActivityTaskScheduledEventAttributes() != nil {
			scheduled[e.GetEventId()] = string(e.GetUserMetadata().GetSummary().GetData())
		}
		failure := e.GetActivityTaskFailedEventAttributes().GetFailure()
		if failure == nil {
			continue
		}
		found = true
		if summary := scheduled[e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()]; !strings.Contains(summary, "configure failing-worker-1") {
			t.Errorf("failed activity's summary %s", summary)
		}
		details := failure.GetApplicationFailureInfo().GetDetails().GetPayloads()
		if len(details) != 1 || string(details[0].GetMetadata()["encoding"]) != "json/plain" ||
			!strings.Contains(string(details[0].GetData()), `"stderrTail":"boom: failing-worker-1 cannot start\n"`) {
			t.Errorf("failed activity's details are not plain JSON with the tails: %v", details)
		}
	}
	if !found {
		t.Error("no failed activity in the worker role's history")
	}

	// A failed cluster can be deleted, and nothing of it stays behind.
	if res := cli(t, "delete", "failing", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	if dir := clusterDir(dataDir, "failing"); exists(dir) {
		t.Errorf("%s still exists after delete", dir)
	}
	// Teardown runs where configure ran: the controller, worker-0, and the failed worker-1.
	// worker-2 never started, since a role stops starting members after a failure.
	runs := readTrace(t, trace)
	if teardowns := runsOf(runs, "failing-", "teardown"); len(teardowns) != 3 {
		t.Errorf("want 3 teardowns, got %+v", teardowns)
	}
	if w2 := runsOf(runs, "failing-worker-2", ""); len(w2) != 0 {
		t.Errorf("worker-2 ran scripts: %+v", w2)
	}
}

func TestInvalidSpecIsRefusedWithEveryProblem(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: Bad_Name
roles:
  - {name: a, startscript: trace.sh, dependsOn: [b]}
  - {name: b, startscript: trace.sh, dependsOn: [a]}
  - {name: c, startscript: scripts/missing.sh, cardinality: "1", members: 3, dependsOn: [nope]}
`)
	res := cli(t, "deploy", "-f", specPath, "--wait")
	if res.Code != 2 {
		t.Fatalf("invalid spec should exit 2: %s", res)
	}
	for _, want := range []string{
		`name: "Bad_Name" is not a DNS-1123 label`,
		"roles: dependency cycle a -> b -> a",
		`roles[2].dependsOn: unknown role "nope"`,
		`roles[2].cardinality: "1" but members is 3`,
		"roles[2].startscript: scripts/missing.sh: no such file",
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("missing %q in:\n%s", want, res.Stderr)
		}
	}
	if list := cli(t, "list", "--all", "-o", "json"); strings.Contains(list.Stdout, "Bad_Name") {
		t.Errorf("an invalid spec started something: %s", list.Stdout)
	}
}

func TestDeployingAnExistingNameIsRefused(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: twice
roles:
  - {name: only, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	if res := cli(t, "deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("first deploy: %s", res)
	}
	res := cli(t, "deploy", "-f", specPath)
	if res.Code != 2 || !strings.Contains(res.Stderr, `cluster "twice" already exists`) {
		t.Fatalf("second deploy should be refused with exit 2: %s", res)
	}
	if runs := readTrace(t, trace); len(runs) != 1 {
		t.Errorf("the refused deploy ran scripts: %+v", runs)
	}
	if res := cli(t, "status", "nope-not-here"); res.Code != 2 || !strings.Contains(res.Stderr, `cluster "nope-not-here" not found`) {
		t.Errorf("status of an unknown cluster: %s", res)
	}
	if res := cli(t, "delete", "nope-not-here"); res.Code != 2 {
		t.Errorf("delete of an unknown cluster: %s", res)
	}
}

func TestDeleteDuringSetupStopsTheScriptAndSkipsLaterLevels(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: midway
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "60"}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	if res := cli(t, "deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	// While it runs, status shows the event, its start and the script's latest output.
	waitFor(t, "status to show the script's last line", func() bool {
		s := statusJSON(t, "midway")
		return s.Role("controller").Members[0].LastLine == "running configure for midway-controller-0 of controller in midway"
	})
	running := statusJSON(t, "midway")
	if m := running.Role("controller").Members[0]; m.Event != "configure" || m.State != workflows.MemberConfiguring || m.Since.IsZero() {
		t.Errorf("running member %+v", m)
	}
	folder := clusterDir(dataDir, "midway")
	res := cli(t, "delete", "midway", "--wait", "--timeout", "60s")
	if res.Code != 0 {
		t.Fatalf("delete --wait: %s", res)
	}
	if pids := testenv.MemberProcesses(folder); len(pids) > 0 {
		t.Errorf("processes left running after delete: %v", pids)
	}
	runs := readTrace(t, trace)
	if workers := runsOf(runs, "midway-worker-", "configure"); len(workers) != 0 {
		t.Errorf("a worker was set up during delete: %+v", workers)
	}
	if c := runsOf(runs, "midway-controller-0", "configure"); len(c) != 1 || c[0].Outcome != "" {
		t.Errorf("the controller's configure should have been stopped, not finished: %+v", c)
	}
	if exists(folder) {
		t.Error("sandboxes left after delete")
	}
	if s := statusJSON(t, "midway"); s.Phase != workflows.PhaseDeleted {
		t.Errorf("phase %s, want deleted", s.Phase)
	}
	// The agent learnt of the cancel from a heartbeat, stopped the script and said so.
	canceled := false
	for _, e := range history(t, "cluster/midway/configure-1/controller") {
		if attrs := e.GetActivityTaskCanceledEventAttributes(); attrs != nil {
			var res runner.Result
			if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetDetails(), &res); err != nil || res.Outcome != runner.Canceled {
				t.Errorf("cancellation details %+v (%v)", res, err)
			}
			canceled = true
		}
	}
	if !canceled {
		t.Error("the controller's configure was not reported cancelled")
	}
}

func maxOverlap(runs []scriptRun) int {
	most := 0
	for _, r := range runs {
		n := 0
		for _, o := range runs {
			if o.Start <= r.Start && r.Start < o.End {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestConfigureTimeoutFailsTheMember(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: slow
roles:
  - {name: only, members: 1, timeout: 1s, startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "30"}}
`)
	res := cli(t, "deploy", "-f", specPath, "--wait")
	if res.Code != 1 {
		t.Fatalf("a configure past its timeout should fail the deploy: %s", res)
	}
	s := statusJSON(t, "slow")
	m := s.Role("only").Members[0]
	if m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, "configure timed out after 1s") || !strings.Contains(m.StdoutTail, "running configure") {
		t.Errorf("member %+v", m)
	}
	if pids := testenv.MemberProcesses(clusterDir(dataDir, "slow")); len(pids) > 0 {
		t.Errorf("the timed-out script is still running: %v", pids)
	}
	mustSucceed(t, "delete", "slow", "--wait")
}
