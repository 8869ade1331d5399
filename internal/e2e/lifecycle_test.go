package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clusterflow/clusterflow/workflows"
)

// TestDeleteTearsDownEveryMemberWhoseConfigureRan deletes clusters whose members are in
// each state a delete can find them in, and checks that exactly the members whose
// configure ran get --teardown: ready, down, configure failed, a notification failed
// (config_error after addnodes, which a delete used to leave running) and configuring
// (cancelled mid-configure); not a member still pending.
func TestDeleteTearsDownEveryMemberWhoseConfigureRan(t *testing.T) {
	t.Parallel()
	guard(t)
	// The subtests run one after another: parallel ones would wait for the suite's slots
	// while the guard's clock runs.
	t.Run("a survivor whose addnodes failed", func(t *testing.T) {
		n := "tornaddnodes"
		specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: %[1]s-worker-0}}
`, n))
		mustSucceed(t, "deploy", "-f", specPath, "--wait")
		if res := cli(t, "resize", n, "worker=2", "--wait", "--timeout", "60s"); res.Code == 0 {
			t.Fatalf("a resize whose addnodes fails should fail: %s", res)
		}
		s := statusJSON(t, n)
		if got := memberStates(s, "worker"); s.Phase != workflows.PhaseFailed || !slices.Equal(got, []string{n + "-worker-0=config_error", n + "-worker-1=ready"}) {
			t.Fatalf("after the failed addnodes: phase %s, workers %v", s.Phase, got)
		}
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		expectRuns(t, readTrace(t, trace), "teardown", "--teardown", n+"-worker-0", n+"-worker-1")
	})
	t.Run("ready down and configure failed", func(t *testing.T) {
		n := "tornfailed"
		specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, maxInFlight: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: %[1]s-worker-1}}
`, n))
		if res := cli(t, "deploy", "-f", specPath, "--wait", "--timeout", "60s"); res.Code != 1 {
			t.Fatalf("the deploy should fail: %s", res)
		}
		mustSucceed(t, "signal", n, n+"-controller-0", "down", "--reason", "test")
		waitFor(t, "the controller to be down", func() bool {
			return slices.Equal(memberStates(statusJSON(t, n), "controller"), []string{n + "-controller-0=down"})
		})
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		expectRuns(t, readTrace(t, trace), "teardown", "--teardown", n+"-controller-0", n+"-worker-0", n+"-worker-1")
	})
	t.Run("configuring and pending", func(t *testing.T) {
		n := "tornmidway"
		specPath, trace := writeCluster(t, resizableSpec(n))
		holdOn(t, trace+".hold-controller")
		mustSucceed(t, "deploy", "-f", specPath)
		waitFor(t, "the controller's configure to start", func() bool { return len(runsOf(readTrace(t, trace), n+"-controller-0", "configure")) == 1 })
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		runs := readTrace(t, trace)
		expectRuns(t, runs, "teardown", "--teardown", n+"-controller-0")
		if configured := runsOf(runs, n+"-worker-", ""); len(configured) != 0 {
			t.Errorf("pending workers ran scripts: %+v", configured)
		}
	})
	// A member with nothing left on its host to run a script in (its setup was stopped
	// before it began, or its sandbox was removed by hand) has nothing to tear down: the
	// delete is no failure.
	t.Run("no sandbox left", func(t *testing.T) {
		n := "tornbare"
		specPath, trace := writeCluster(t, fmt.Sprintf("name: %s\nroles:\n  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}}\n", n))
		mustSucceed(t, "deploy", "-f", specPath, "--wait")
		if err := os.RemoveAll(filepath.Join(clusterDir(dataDir, n), n+"-worker-0")); err != nil {
			t.Fatal(err)
		}
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		if s := statusJSON(t, n); len(s.FailedTeardowns) != 0 {
			t.Errorf("a member without a sandbox counted as a failed teardown: %+v", s.FailedTeardowns)
		}
		expectRuns(t, readTrace(t, trace), "teardown", "")
	})
}

// TestNamesAreNeverReusedAndSurvivorsHearOfTheSuccessorFirst shrinks a role and grows it
// again (the new member takes the next ordinal, not a removed one: apps like etcd remember
// members by name), then replaces a member: its survivors run addnodes of the successor
// before delnodes of the member it replaces, after that member's teardown. Every member is
// told its story: CLUSTERFLOW_JOINING, CLUSTERFLOW_REPLACES and CLUSTERFLOW_BOOTSTRAP on its
// configure, CLUSTERFLOW_REASON on its teardown.
func TestNamesAreNeverReusedAndSurvivorsHearOfTheSuccessorFirst(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "noreuse"
	specPath, trace := writeCluster(t, healthSpec(n, "1s"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "resize", n, "worker=4", "--wait")
	mustSucceed(t, "resize", n, "worker=2", "--wait")
	mustSucceed(t, "resize", n, "worker=3", "--wait")
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-1=ready", n+"-worker-4=ready")

	if res := cli(t, "signal", n, n+"-worker-1", "down", "--reason", "test"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-4=ready", n+"-worker-5=ready<"+n+"-worker-1")
	runs := readTrace(t, trace)
	teardown := runsOf(runs, n+"-worker-1", "teardown")
	if len(teardown) != 1 {
		t.Fatalf("the replaced member's teardowns: %+v", teardown)
	}
	var told []string
	for _, r := range runs {
		if r.Event == "addnodes" && strings.HasSuffix(r.Args, "--nodes "+n+"-worker-5") ||
			r.Event == "delnodes" && strings.HasSuffix(r.Args, "--nodes "+n+"-worker-1") {
			told = append(told, r.Member+" "+r.Event)
		}
	}
	want := []string{n + "-controller-0 addnodes", n + "-worker-0 addnodes", n + "-worker-4 addnodes", n + "-controller-0 delnodes", n + "-worker-0 delnodes", n + "-worker-4 delnodes"}
	slices.Sort(want)
	if !slices.Equal(slices.Sorted(slices.Values(told)), want) {
		t.Fatalf("survivors were told %v, want %v", told, want)
	}
	for _, add := range runsOf(runs, "", "addnodes") {
		if !strings.HasSuffix(add.Args, n+"-worker-5") {
			continue
		}
		if add.Start < teardown[0].End {
			t.Errorf("%s heard of the successor before its predecessor's teardown ended", add.Member)
		}
		for _, del := range runsOf(runs, "", "delnodes") {
			if strings.HasSuffix(del.Args, n+"-worker-1") && del.Start < add.End {
				t.Errorf("delnodes of the replaced member on %s started before addnodes of its successor on %s ended", del.Member, add.Member)
			}
		}
	}
	mustSucceed(t, "delete", n, "--wait")

	// Each configure was told whether it joins and whom it replaces, and each teardown why
	// its member left.
	line := func(member, event, reason, joining, replaces string) string {
		return fmt.Sprintf("%s-%s %s reason=%s joining=%s replaces=%s", n, member, event, reason, joining, replaces)
	}
	wantConfigures := []string{
		line("controller-0", "configure", "", "", ""), line("worker-0", "configure", "", "", ""), line("worker-1", "configure", "", "", ""),
		line("worker-2", "configure", "", "1", ""), line("worker-3", "configure", "", "1", ""), line("worker-4", "configure", "", "1", ""),
		line("worker-5", "configure", "", "1", n+"-worker-1"),
	}
	if got := story(t, trace, "configure"); !slices.Equal(got, wantConfigures) {
		t.Errorf("configures were told\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantConfigures, "\n"))
	}
	// One member of each role's first setup formed its app cluster, and configmeta named it
	// to the others; those that came later join (the replacement of a member that had
	// formed it included), and no configure is told to form it again.
	form := func(member, bootstrap, formedBy string) string {
		return fmt.Sprintf("%s-%s bootstrap=%s formedby=%s", n, member, bootstrap, formedBy)
	}
	wantForms := []string{
		form("controller-0", "1", n+"-controller-0"), form("worker-0", "1", n+"-worker-0"), form("worker-1", "", n+"-worker-0"),
		form("worker-2", "", n+"-worker-0"), form("worker-3", "", n+"-worker-0"), form("worker-4", "", n+"-worker-0"),
		form("worker-5", "", n+"-worker-0"),
	}
	if got := forms(t, trace); !slices.Equal(got, wantForms) {
		t.Errorf("configures were told who forms the cluster\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantForms, "\n"))
	}
	wantTeardowns := []string{
		line("controller-0", "teardown", "delete", "", ""), line("worker-0", "teardown", "delete", "", ""),
		line("worker-1", "teardown", "replace", "", ""), line("worker-2", "teardown", "shrink", "", ""), line("worker-3", "teardown", "shrink", "", ""),
		line("worker-4", "teardown", "delete", "", ""), line("worker-5", "teardown", "delete", "", ""),
	}
	if got := story(t, trace, "teardown"); !slices.Equal(got, wantTeardowns) {
		t.Errorf("teardowns were told\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantTeardowns, "\n"))
	}
}

// hiddenDaemonsScript is a startscript whose configure leaves two daemons that hide from a
// sweep by environment, each writing its PID to $PIDS/<member>.<kind>: one started without
// the script's environment, one that writes over its environment for its process title,
// as Redis does.
const hiddenDaemonsScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
env -i setsid /bin/sh -c 'echo $$ > "$0.plain"; exec sleep 86400' "$PIDS/$CLUSTERFLOW_MEMBER" < /dev/null > /dev/null 2>&1 &
setsid perl -e 'open(my $f, ">", "$ARGV[0].titled"); print $f "$$\n"; close $f; $0 = "redis-server *:6379 " . ("x" x 4000); sleep 86400' "$PIDS/$CLUSTERFLOW_MEMBER" < /dev/null > /dev/null 2>&1 &
`

// daemonsOf waits for a member's two hidden daemons to write their PIDs, and returns them.
func daemonsOf(t *testing.T, pids, member string) []int {
	t.Helper()
	var found []int
	waitFor(t, member+"'s daemons to start", func() bool {
		found = nil
		for _, kind := range []string{"plain", "titled"} {
			data, _ := os.ReadFile(filepath.Join(pids, member+"."+kind))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				found = append(found, pid)
			}
		}
		return len(found) == 2
	})
	return found
}

func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}

// TestDaemonsThatHideTheirEnvironmentDieWithTheirMember runs, on the shared root host
// without script users, members whose configure leaves daemons no environment sweep finds;
// a shrink ends the removed member's, and only its, and a delete ends the rest. (With
// script users, TestClustersLiveTheirWholeLifeAsUsersOfTheirOwn checks the same.)
func TestDaemonsThatHideTheirEnvironmentDieWithTheirMember(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "hiders"
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "daemons.sh"), []byte(hiddenDaemonsScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf("name: %s\nroles:\n  - {name: m, members: 2, startscript: daemons.sh, env: {PIDS: %q}}\n", n, pids)), 0o644); err != nil {
		t.Fatal(err)
	}
	var all []int
	t.Cleanup(func() {
		for _, pid := range all {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	kept, removed := daemonsOf(t, pids, n+"-m-0"), daemonsOf(t, pids, n+"-m-1")
	all = append(kept, removed...)
	mustSucceed(t, "resize", n, "m=1", "--wait")
	waitFor(t, "the removed member's daemons to end", func() bool { return !running(removed[0]) && !running(removed[1]) })
	for _, pid := range kept {
		if !running(pid) {
			t.Errorf("daemon %d of the member that stays was killed by the shrink", pid)
		}
	}
	mustSucceed(t, "delete", n, "--wait")
	waitFor(t, "every daemon to end with the cluster", func() bool { return !running(kept[0]) && !running(kept[1]) })
}

// TestRetryRunsAFailedConfigureAgain deploys a cluster whose worker fails its configure
// until the cause (a file) is fixed: status says how to retry, a retry of members that did
// not fail is refused naming why, and once the cause is gone `retry --wait` sets up the
// same member again (the same name, no replacement) and the level it held up, running
// nothing else twice.
func TestRetryRunsAFailedConfigureAgain(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "retried"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: %[1]s-worker-1, FAIL_WHILE: TRACE_FILE.broken}}
  - {name: edge, members: 1, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: worker}}
`, n))
	holdOn(t, trace+".broken")
	if res := cli(t, "deploy", "-f", specPath, "--wait", "--timeout", "60s"); res.Code != 1 || !strings.Contains(res.Stdout, "clusterflow retry "+n) {
		t.Fatalf("the deploy should fail, saying how to retry: %s", res)
	}
	if res := cli(t, "status", n); !strings.Contains(res.Stdout, "Hint:     `clusterflow retry "+n+"` runs the failed configures and notifications again") {
		t.Errorf("status of the failed cluster gives no retry hint: %s", res)
	}
	if res := cli(t, "resize", n, "worker=2"); res.Code != 0 || !strings.Contains(res.Stdout, "nothing to do") || !strings.Contains(res.Stdout, "clusterflow retry "+n) {
		t.Errorf("a resize to the same size of a failed cluster should say how to retry: %s", res)
	}
	events := countEvents(t, workflows.ClusterWorkflowID(n))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{n + "-controller-0"}, "member " + n + "-controller-0 is ready, not config_error: nothing to retry"},
		{[]string{n + "-worker-9", n + "-edge-0"}, `cluster ` + n + ` has no member "` + n + `-worker-9"; member ` + n + `-edge-0 is pending, not config_error`},
		{[]string{n + "-worker-1", n + "-worker-1"}, "member " + n + "-worker-1 is named more than once"},
	} {
		if res := cli(t, append([]string{"retry", n}, tc.args...)...); res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("retry %v: want exit 2 saying %q: %s", tc.args, tc.want, res)
		}
	}
	if after := countEvents(t, workflows.ClusterWorkflowID(n)); after != events {
		t.Errorf("refused retries wrote %d events to the history", after-events)
	}

	release(t, trace+".broken")
	res := cli(t, "retry", n, "--wait", "--timeout", "60s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "retry "+n+"-worker-1") {
		t.Fatalf("retry --wait: %s", res)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhaseReady || !slices.Equal(workerNames(s), []string{n + "-worker-0=ready", n + "-worker-1=ready"}) {
		t.Errorf("after the retry: phase %s (%s), workers %v", s.Phase, s.Message, workerNames(s))
	}
	runs := readTrace(t, trace)
	for member, want := range map[string]int{"controller-0": 1, "worker-0": 1, "worker-1": 2, "edge-0": 1} {
		if got := len(runsOf(runs, n+"-"+member, "configure")); got != want {
			t.Errorf("%s configured %d times, want %d", member, got, want)
		}
	}
	if res := cli(t, "retry", n); res.Code != 2 || !strings.Contains(res.Stderr, "no member of cluster "+n+" is in config_error") {
		t.Errorf("a retry with nothing to retry: %s", res)
	}
	mustSucceed(t, "delete", n, "--wait")
}

// TestAFailedTeardownIsSeen shrinks a role whose leaving member's teardown fails, and
// deletes a cluster whose member's teardown fails: each member is removed all the same,
// but --wait exits 1 naming it with its output, status lists it, and `logs` still reads
// its teardown's output from the host.
func TestAFailedTeardownIsSeen(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "badteardown"
	specPath, _ := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 3, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: teardown, FAIL_MEMBER: %[1]s-worker-2}}
  - {name: edge, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: teardown, FAIL_MEMBER: %[1]s-edge-0}}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	res := cli(t, "resize", n, "worker=2", "--wait", "--timeout", "60s")
	if res.Code != 1 || !strings.Contains(res.Stderr, "the teardown of "+n+"-worker-2 failed") || !strings.Contains(res.Stdout, "boom: "+n+"-worker-2 cannot start") {
		t.Errorf("a shrink whose teardown fails should exit 1 naming the member, with its output: %s", res)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhaseReady || len(s.FailedTeardowns) != 1 || s.FailedTeardowns[0].Member != n+"-worker-2" || s.FailedTeardowns[0].Reason != "shrink" ||
		!strings.Contains(s.FailedTeardowns[0].StderrTail, "boom") || s.Member(n+"-worker-2") != nil {
		t.Errorf("after the shrink: phase %s, failed teardowns %+v", s.Phase, s.FailedTeardowns)
	}
	if res := cli(t, "status", n); !strings.Contains(res.Stdout, "Failed teardowns") || !strings.Contains(res.Stdout, n+"-worker-2 (shrink, generation 2") {
		t.Errorf("status does not show the failed teardown: %s", res)
	}
	if res := cli(t, "logs", n, n+"-worker-2", "--event", "teardown"); res.Code != 0 || !strings.Contains(res.Stdout, "about to fail") || !strings.Contains(res.Stderr, "boom") {
		t.Errorf("logs of the removed member's teardown: %s", res)
	}
	res = cli(t, "delete", n, "--wait", "--timeout", "60s")
	if res.Code != 1 || !strings.Contains(res.Stderr, "the teardown of "+n+"-edge-0 failed") || strings.Contains(res.Stderr, n+"-worker-2") {
		t.Errorf("a delete whose teardown fails should exit 1 naming that member alone: %s", res)
	}
	if s := statusJSON(t, n); s.Phase != workflows.PhaseDeleted {
		t.Errorf("phase %s after the delete, want deleted", s.Phase)
	}
}

// TestLeavingMembersAreDecommissionedFirst shrinks a role that subscribes to decommission:
// each leaving member runs --decommission before its teardown, with its reason; one whose
// decommission fails stays (the cluster paused, --wait exit 1 with its output), and a retry
// once its cause is gone decommissions and removes it. A replacement decommissions the
// member it replaces once its successor is set up; a delete decommissions nobody.
func TestLeavingMembersAreDecommissionedFirst(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "decom"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 3, replaceAfter: 1s, events: [configure, addnodes, delnodes, decommission, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: decommission, FAIL_MEMBER: %[1]s-worker-2, FAIL_WHILE: TRACE_FILE.broken}}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".broken")
	res := cli(t, "resize", n, "worker=1", "--wait", "--timeout", "60s")
	if res.Code != 1 || !strings.Contains(res.Stderr, "removal paused: the decommission of "+n+"-worker-2 failed") || !strings.Contains(res.Stdout, "boom: "+n+"-worker-2") {
		t.Fatalf("a shrink whose decommission fails should pause, exit 1 and show the output: %s", res)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhasePaused || !slices.Equal(workerNames(s), []string{n + "-worker-0=ready", n + "-worker-2=ready"}) || s.Member(n+"-worker-2").Decommission != workflows.DecommissionFailed {
		t.Fatalf("after the paused shrink: phase %s (%s), workers %v", s.Phase, s.Message, workerNames(s))
	}
	runs := readTrace(t, trace)
	decommissioned, tornDown := runsOf(runs, n+"-worker-1", "decommission"), runsOf(runs, n+"-worker-1", "teardown")
	if len(decommissioned) != 1 || len(tornDown) != 1 || tornDown[0].Start < decommissioned[0].End || decommissioned[0].Args != "--decommission" {
		t.Errorf("worker-1 should be decommissioned, then torn down: %+v %+v", decommissioned, tornDown)
	}
	if len(runsOf(runs, n+"-worker-2", "teardown")) != 0 {
		t.Error("the member whose decommission failed was torn down")
	}
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes "+n+"-worker-1", n+"-worker-0")

	release(t, trace+".broken")
	if res := cli(t, "retry", n, "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("retry of the decommission: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-0=ready")
	runs = readTrace(t, trace)
	if got := len(runsOf(runs, n+"-worker-2", "decommission")); got != 2 {
		t.Errorf("worker-2 decommissioned %d times, want 2 (failed, then retried)", got)
	}
	expectRuns(t, runs, "teardown", "--teardown", n+"-worker-1", n+"-worker-2")

	// A replacement: the successor is set up first, then the replaced member is
	// decommissioned and torn down.
	mustSucceed(t, "resize", n, "worker=2", "--wait")
	mustSucceed(t, "signal", n, n+"-worker-0", "down", "--reason", "test")
	waitForWorkers(t, n, n+"-worker-3=ready", n+"-worker-4=ready<"+n+"-worker-0")
	runs = readTrace(t, trace)
	successor, decommission, teardown := runsOf(runs, n+"-worker-4", "configure"), runsOf(runs, n+"-worker-0", "decommission"), runsOf(runs, n+"-worker-0", "teardown")
	if len(successor) != 1 || len(decommission) != 1 || len(teardown) != 1 || decommission[0].Start < successor[0].End || teardown[0].Start < decommission[0].End {
		t.Errorf("replacement: want the successor's configure, then decommission, then teardown: %+v %+v %+v", successor, decommission, teardown)
	}
	mustSucceed(t, "delete", n, "--wait")
	want := []string{
		n + "-worker-0 decommission reason=replace joining= replaces=",
		n + "-worker-1 decommission reason=shrink joining= replaces=",
		n + "-worker-2 decommission reason=shrink joining= replaces=",
		n + "-worker-2 decommission reason=shrink joining= replaces=",
	}
	if got := story(t, trace, "decommission"); !slices.Equal(got, want) {
		t.Errorf("decommissions (a delete runs none): %q, want %q", got, want)
	}
	// Configmeta showed each member leaving by the shrink as leaving, to itself, while it
	// was decommissioned and torn down, and so was a replaced member (which #39 asked to
	// stay listed, as leaving, until it is gone; it was unlisted before).
	data, _ := os.ReadFile(trace + ".meta")
	for _, line := range []string{
		n + `-worker-1 decommission "state":"leaving"`, n + `-worker-1 teardown "state":"leaving"`,
		n + `-worker-2 decommission "state":"leaving"`, n + `-worker-2 teardown "state":"leaving"`,
		n + `-worker-0 decommission "state":"leaving"`, n + `-worker-0 teardown "state":"leaving"`,
	} {
		if !strings.Contains(string(data), line+"\n") {
			t.Errorf("configmeta as the members left: want %q in\n%s", line, data)
		}
	}
}

// portsScript records the ports a member was given, from its environment, and binds each
// for a moment: a port given twice, or taken by something else, fails the configure.
const portsScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
echo "$CLUSTERFLOW_MEMBER client=$CLUSTERFLOW_PORT_CLIENT peer=$CLUSTERFLOW_PORT_PEER" >> "$PORTS"
perl -MIO::Socket::INET -e 'for (@ARGV) { IO::Socket::INET->new(LocalPort => $_, Listen => 1, ReuseAddr => 1) or die "bind $_: $!\n" }' "$CLUSTERFLOW_PORT_CLIENT" "$CLUSTERFLOW_PORT_PEER"
`

// TestMembersOnOneHostGetPortsOfTheirOwn deploys two clusters whose roles name the same
// ports on the one shared host: every member gets distinct ports from the host's range,
// the same in its environment, its status and configmeta, for its whole life; a member
// removed frees its ports, which its successor does not get while the range has others.
func TestMembersOnOneHostGetPortsOfTheirOwn(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ports.sh"), []byte(portsScript), 0o755); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "ports.log")
	for _, n := range []string{"porta", "portb"} {
		spec := fmt.Sprintf("name: %s\nroles:\n  - {name: m, members: 3, ports: {client: 2379, peer: 2380}, startscript: ports.sh, env: {PORTS: %q}}\n", n, record)
		if err := os.WriteFile(filepath.Join(dir, n+".yaml"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		mustSucceed(t, "deploy", "-f", filepath.Join(dir, n+".yaml"), "--wait")
	}
	given := func() map[string]string {
		data, _ := os.ReadFile(record)
		out := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if member, ports, ok := strings.Cut(line, " "); ok {
				out[member] = ports
			}
		}
		return out
	}
	check := func(when string, clusters map[string][]int) {
		t.Helper()
		seen := map[int]string{}
		env := given()
		for n, ordinals := range clusters {
			s := statusJSON(t, n)
			meta, err := os.ReadFile(filepath.Join(clusterDir(dataDir, n), ".clusterflow", "configmeta.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range ordinals {
				name := fmt.Sprintf("%s-m-%d", n, o)
				m := s.Member(name)
				if m == nil || len(m.Ports) != 2 {
					t.Errorf("%s: %s has ports %v", when, name, m)
					continue
				}
				if want := fmt.Sprintf("client=%d peer=%d", m.Ports["client"], m.Ports["peer"]); env[name] != want {
					t.Errorf("%s: %s's environment gave %q, its status %q", when, name, env[name], want)
				}
				if want := fmt.Sprintf(`"name":"%s","role":"m","ordinal":%d,`, name, o); !strings.Contains(string(meta), want) ||
					!strings.Contains(string(meta), fmt.Sprintf(`"address":"127.0.0.1","ports":{"client":%d,"peer":%d}`, m.Ports["client"], m.Ports["peer"])) {
					t.Errorf("%s: configmeta does not give %s's address and ports %v:\n%s", when, name, m.Ports, meta)
				}
				for _, port := range m.Ports {
					if port < 61000 || port > 63999 {
						t.Errorf("%s: %s has port %d, outside the host's range", when, name, port)
					}
					if other, taken := seen[port]; taken {
						t.Errorf("%s: port %d given to both %s and %s", when, port, other, name)
					}
					seen[port] = name
				}
			}
		}
	}
	check("after the deploys", map[string][]int{"porta": {0, 1, 2}, "portb": {0, 1, 2}})
	s := statusJSON(t, "porta")
	before, removed := s.Member("porta-m-0").Ports, s.Member("porta-m-2").Ports
	mustSucceed(t, "resize", "porta", "m=2", "--wait")
	mustSucceed(t, "resize", "porta", "m=3", "--wait")
	check("after a shrink and a grow", map[string][]int{"porta": {0, 1, 3}, "portb": {0, 1, 2}})
	s = statusJSON(t, "porta")
	if after := s.Member("porta-m-0").Ports; !maps.Equal(before, after) {
		t.Errorf("porta-m-0's ports changed from %v to %v", before, after)
	}
	// The removed member's peers may still dial its ports: the next member gets others.
	for name, port := range s.Member("porta-m-3").Ports {
		if slices.Contains(slices.Collect(maps.Values(removed)), port) {
			t.Errorf("porta-m-3's %s port %d was the removed porta-m-2's (%v) while the range had others free", name, port, removed)
		}
	}
	// A role with members keeps its ports: an apply that changes them is refused.
	changed := filepath.Join(dir, "porta-changed.yaml")
	if err := os.WriteFile(changed, []byte(fmt.Sprintf("name: porta\nroles:\n  - {name: m, members: 3, ports: {client: 2379, peer: 2381}, startscript: ports.sh, env: {PORTS: %q}}\n", record)), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, "apply", "-f", changed); res.Code != 2 || !strings.Contains(res.Stderr, "its ports cannot change") {
		t.Errorf("an apply changing a role's ports: %s, want exit 2 saying its ports cannot change", res)
	}
	for _, n := range []string{"porta", "portb"} {
		mustSucceed(t, "delete", n, "--wait")
	}
}

// TestSurvivorsHearOfMembersAboutToLeave: a role subscribed to removing hears of members
// a shrink takes away before their decommission and teardown, while they still run; a
// failed addnodes is told again by retry; and a member's configure gets its address.
func TestSurvivorsHearOfMembersAboutToLeave(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "removing"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 2, events: [configure, decommission, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: admin, members: 1, dependsOn: [worker], events: [configure, addnodes, removing, delnodes], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: %[1]s-admin-0, FAIL_WHILE: TRACE_FILE.broken}}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	if data, err := os.ReadFile(filepath.Join(clusterDir(dataDir, n), n+"-worker-0", "address")); err != nil || strings.TrimSpace(string(data)) != "127.0.0.1" {
		t.Errorf("CLUSTERFLOW_ADDRESS in single-host mode: %q, %v", data, err)
	}

	holdOn(t, trace+".broken")
	if res := cli(t, "resize", n, "worker=3", "--wait", "--timeout", "60s"); res.Code != 1 || !strings.Contains(res.Stdout, "boom: "+n+"-admin-0") {
		t.Fatalf("a grow whose addnodes fails should exit 1 and show the output: %s", res)
	}
	if s := statusJSON(t, n); s.Member(n+"-admin-0") == nil || s.Member(n+"-admin-0").State != workflows.MemberConfigError || s.Member(n+"-admin-0").Event != "addnodes" {
		t.Fatalf("the admin after its failed addnodes: %+v", s.Member(n+"-admin-0"))
	}
	release(t, trace+".broken")
	if res := cli(t, "retry", n, "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("retry of the failed addnodes: %s", res)
	}
	runs := readTrace(t, trace)
	if told := runsOf(runs, n+"-admin-0", "addnodes"); len(told) != 2 || told[1].Args != "--addnodes --role worker --nodes "+n+"-worker-2" {
		t.Fatalf("the admin should be told of worker-2 again by the retry: %+v", told)
	}
	if s := statusJSON(t, n); s.Phase != workflows.PhaseReady {
		t.Fatalf("after the retry: %s (%s)", s.Phase, s.Message)
	}

	mustSucceed(t, "resize", n, "worker=2", "--wait", "--timeout", "60s")
	runs = readTrace(t, trace)
	removing := runsOf(runs, n+"-admin-0", "removing")
	decommission, teardown := runsOf(runs, n+"-worker-2", "decommission"), runsOf(runs, n+"-worker-2", "teardown")
	if len(removing) != 1 || removing[0].Args != "--removing --role worker --nodes "+n+"-worker-2" || len(decommission) != 1 || len(teardown) != 1 ||
		decommission[0].Start < removing[0].End || teardown[0].Start < decommission[0].End {
		t.Fatalf("the shrink: want the admin's removing, then the leaver's decommission, then its teardown: %+v %+v %+v", removing, decommission, teardown)
	}
	if len(runsOf(runs, n+"-worker-", "removing")) != 0 {
		t.Error("a role not subscribed to removing heard it")
	}
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes "+n+"-worker-2", n+"-admin-0")
	mustSucceed(t, "delete", n, "--wait")
	if got := len(runsOf(readTrace(t, trace), "", "removing")); got != 1 {
		t.Errorf("%d removing runs, want 1: a delete tells none", got)
	}
}

// TestAFailedRemovingHoldsTheLeavers: when a survivor's removing fails, the members it
// named are neither decommissioned nor torn down; the cluster is failed (the survivor in
// config_error) and --wait exits 1 until retry tells the removing again, and only then do
// they go.
func TestAFailedRemovingHoldsTheLeavers(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "held"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 3, events: [configure, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: admin, members: 1, dependsOn: [worker], events: [configure, addnodes, removing, delnodes], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: removing, FAIL_MEMBER: %[1]s-admin-0, FAIL_WHILE: TRACE_FILE.broken}}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".broken")
	res := cli(t, "resize", n, "worker=2", "--wait", "--timeout", "60s")
	if res.Code != 1 || !strings.Contains(res.Stdout, "boom: "+n+"-admin-0") {
		t.Fatalf("a shrink whose removing fails should pause and exit 1: %s\nstdout: %s\nstderr: %s", res, res.Stdout, res.Stderr)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhaseFailed || !slices.Equal(workerNames(s), []string{n + "-worker-0=ready", n + "-worker-1=ready", n + "-worker-2=ready"}) ||
		s.Member(n+"-worker-2").Decommission != workflows.DecommissionFailed || !strings.Contains(s.Member(n+"-worker-2").Detail, "removal held: removing failed on "+n+"-admin-0") {
		t.Fatalf("after the held shrink: phase %s (%s), workers %v", s.Phase, s.Message, workerNames(s))
	}
	if len(runsOf(readTrace(t, trace), n+"-worker-2", "teardown")) != 0 {
		t.Fatal("a member held by a failed removing was torn down")
	}
	release(t, trace+".broken")
	if res := cli(t, "retry", n, "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("retry of the removing: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-1=ready")
	runs := readTrace(t, trace)
	removing, teardown := runsOf(runs, n+"-admin-0", "removing"), runsOf(runs, n+"-worker-2", "teardown")
	if len(removing) != 2 || len(teardown) != 1 || teardown[0].Start < removing[1].End {
		t.Errorf("want the removing failed, told again, then the teardown: %+v %+v", removing, teardown)
	}
	mustSucceed(t, "delete", n, "--wait")
}
