package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// rolloutSpec is a controller, four workers that can upgrade in place and two edges, the
// workers' env and update policy given.
func rolloutSpec(name, workerEnv, update string) string {
	return fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - name: worker
    members: 4
    dependsOn: [controller]
    startscript: trace.sh
    events: [configure, addnodes, delnodes, teardown, upgrade]
    env: {TRACE: TRACE_FILE, DEPS: controller%s}
    update: {%s}
  - {name: edge, members: 2, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`, name, workerEnv, update)
}

func revisionsOf(s workflows.ClusterStatus, role string) []int {
	var revs []int
	for _, m := range s.Role(role).Members {
		revs = append(revs, m.Revision)
	}
	return revs
}

func TestAnInPlaceRolloutUpdatesOnlyTheChangedRoleCanaryFirst(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "rolled"
	policy := "canaries: 1, maxInFlight: 2, watch: 1s"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	next := writeSpec(t, specPath, "v2.yaml", rolloutSpec(n, ", VERSION: '2', UPGRADE_SLEEP: '1'", policy))

	dry := cli(t, "apply", "-f", next, "--dry-run")
	if dry.Code != 0 {
		t.Fatalf("apply --dry-run: %s", dry)
	}
	if runs := runsOf(readTrace(t, trace), "", "upgrade"); len(runs) != 0 {
		t.Fatalf("a dry run ran upgrades: %+v", runs)
	}

	res := cli(t, "apply", "-f", next, "--wait", "--timeout", "3m")
	if res.Code != 0 || !strings.Contains(res.Stdout, "revision 2") {
		t.Fatalf("apply v2: %s", res)
	}
	runs := readTrace(t, trace)
	workers := []string{n + "-worker-0", n + "-worker-1", n + "-worker-2", n + "-worker-3"}
	expectRuns(t, runs, "upgrade", "--upgrade --from-revision 1 --to-revision 2", workers...)
	upgrades := runsOf(runs, "", "upgrade")
	canary := upgrades[0]
	for _, u := range upgrades[1:] {
		if u.Start < canary.End {
			t.Errorf("%s started its upgrade before the canary %s ended", u.Member, canary.Member)
		}
	}
	if most := maxOverlap(upgrades[1:]); most > 2 {
		t.Errorf("%d upgrades ran at once after the canary; maxInFlight is 2", most)
	}
	// The dry run named the batches that then ran: the canary alone, then two at once.
	for _, want := range []string{"revision 2", "1. canary: " + n + "-worker-0", "2. batch: " + n + "-worker-1, " + n + "-worker-2", "3. batch: " + n + "-worker-3"} {
		if !strings.Contains(dry.Stdout, want) {
			t.Errorf("the dry run does not say %q:\n%s", want, dry.Stdout)
		}
	}
	byMember := map[string]scriptRun{}
	for _, u := range upgrades {
		byMember[u.Member] = u
	}
	w1, w2, w3 := byMember[n+"-worker-1"], byMember[n+"-worker-2"], byMember[n+"-worker-3"]
	if canary.Member != n+"-worker-0" || w1.Start >= w2.End || w2.Start >= w1.End || w3.Start < w1.End || w3.Start < w2.End {
		t.Errorf("the upgrades did not run as the dry run said (canary, then 1 and 2 together, then 3): %+v", upgrades)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhaseReady || s.Revision != 2 || s.Rollout == nil || s.Rollout.State != workflows.RolloutDone {
		t.Errorf("after the rollout: phase %s (%s), revision %d, rollout %+v", s.Phase, s.Message, s.Revision, s.Rollout)
	}
	if got := revisionsOf(s, "worker"); !slices.Equal(got, []int{2, 2, 2, 2}) {
		t.Errorf("workers run revisions %v, want all 2", got)
	}
	for _, role := range []string{"controller", "edge"} {
		if got := runsOf(runs, n+"-"+role, "upgrade"); len(got) != 0 {
			t.Errorf("role %s was touched: %+v", role, got)
		}
		for _, rev := range revisionsOf(s, role) {
			if rev != 1 {
				t.Errorf("role %s runs revision %d, want 1", role, rev)
			}
		}
	}
	if res := cli(t, "rollout", "status", n); res.Code != 0 || !strings.Contains(res.Stdout, "rollout of revision 2 done") {
		t.Errorf("rollout status: %s", res)
	}
	if res := cli(t, "revisions", n); res.Code != 0 || !strings.Contains(res.Stdout, "worker: env") || strings.Count(res.Stdout, "\n") != 3 {
		t.Errorf("revisions: %s", res)
	}
	// A dry run serves resizes too, and changes nothing.
	if res := cli(t, "resize", n, "worker=6", "--dry-run"); res.Code != 0 || !strings.Contains(res.Stdout, "configure: "+n+"-worker-4, "+n+"-worker-5; addnodes to 7 members") {
		t.Errorf("resize --dry-run: %s", res)
	}
	if res := cli(t, "resize", n, "worker=-1", "--dry-run"); res.Code != 2 || !strings.Contains(res.Stderr, "cannot be negative") {
		t.Errorf("resize --dry-run to a negative count is not refused: %s", res)
	}
	if after := statusJSON(t, n); after.Generation != s.Generation || after.Role("worker").Desired != 4 {
		t.Errorf("a dry run changed the cluster: generation %d → %d", s.Generation, after.Generation)
	}
	mustSucceed(t, "delete", n, "--wait")
}

func TestAFailedCanaryPausesTheRolloutAndUndoRestoresIt(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "canaried"
	policy := "canaries: 1, maxInFlight: 2, watch: 0s"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	bad := writeSpec(t, specPath, "bad.yaml", rolloutSpec(n, fmt.Sprintf(", FAIL_EVENT: upgrade, FAIL_MEMBER: %s-worker-0", n), policy))
	res := cli(t, "apply", "-f", bad, "--wait", "--timeout", "3m")
	if res.Code == 0 || !strings.Contains(res.Stdout+res.Stderr, "rollout paused") || !strings.Contains(res.Stdout, "boom") {
		t.Fatalf("apply of a failing upgrade: %s", res)
	}
	s := statusJSON(t, n)
	if s.Phase != workflows.PhaseRolloutPaused || s.Rollout.Member != n+"-worker-0" || !strings.Contains(s.Message, "revision 2") {
		t.Fatalf("after the failed canary: phase %s (%s), rollout %+v", s.Phase, s.Message, s.Rollout)
	}
	runs := readTrace(t, trace)
	expectFailedOnly := runsOf(runs, "", "upgrade")
	if len(expectFailedOnly) != 1 || expectFailedOnly[0].Member != n+"-worker-0" {
		t.Fatalf("upgrades %+v: want the canary's alone", expectFailedOnly)
	}
	if got := revisionsOf(s, "worker"); !slices.Equal(got, []int{2, 1, 1, 1}) {
		t.Errorf("workers run revisions %v, want the canary moved and the others on 1", got)
	}
	if res := cli(t, "rollout", "undo", n); res.Code != 0 {
		t.Fatalf("rollout undo: %s", res)
	}
	if res := cli(t, "rollout", "status", n, "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("rollout status --wait after undo: %s", res)
	}
	runs = readTrace(t, trace)
	undone := runsOf(runs, "", "upgrade")[1:]
	if len(undone) != 1 || undone[0].Member != n+"-worker-0" || undone[0].Args != "--upgrade --from-revision 2 --to-revision 3" || undone[0].Outcome != "ok" {
		t.Errorf("undo ran %+v: want the canary alone, from 2 to 3", undone)
	}
	s = statusJSON(t, n)
	if s.Phase != workflows.PhaseReady || s.Revision != 3 {
		t.Errorf("after undo: phase %s (%s), revision %d", s.Phase, s.Message, s.Revision)
	}
	mustSucceed(t, "delete", n, "--wait")
}

func TestADownReportDuringTheWatchPausesTheRolloutUntilResumed(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "gated"
	policy := "canaries: 1, maxInFlight: 2, watch: 5m"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	next := writeSpec(t, specPath, "v2.yaml", rolloutSpec(n, ", VERSION: '2'", policy))
	mustSucceed(t, "apply", "-f", next)
	canary := n + "-worker-0"
	waitFor(t, "the canary in its watch", func() bool {
		s := statusJSON(t, n)
		return s.Rollout != nil && len(s.Rollout.Roles) > 0 && slices.Contains(s.Rollout.Roles[0].InWatch, canary)
	})
	mustSucceed(t, "signal", n, canary, "down")
	waitFor(t, "the rollout to pause", func() bool { return statusJSON(t, n).Phase == workflows.PhaseRolloutPaused })
	s := statusJSON(t, n)
	if s.Rollout.Member != canary || !strings.Contains(s.Rollout.Paused, "reported down") {
		t.Errorf("paused rollout: %+v", s.Rollout)
	}
	if got := runsOf(readTrace(t, trace), "", "upgrade"); len(got) != 1 {
		t.Errorf("upgrades while paused: %+v", got)
	}
	// The Web UI's current details show the rollout's progress and the revision before it.
	if details := currentDetailsOf(t, server.Client, workflows.ClusterWorkflowID(n)); !strings.Contains(details, "rollout-paused: rollout of revision 2 paused") ||
		!strings.Contains(details, "worker 1 updated, 0 in watch, 3 waiting") || !strings.Contains(details, "revision 1 was deployed") {
		t.Errorf("current details while paused: %q", details)
	}
	// The ClusterPhase search attribute (the Web UI's and `list`'s) says so too.
	waitFor(t, "list to show the rollout paused", func() bool {
		res := cli(t, "list", "--all")
		for _, line := range strings.Split(res.Stdout, "\n") {
			if strings.HasPrefix(line, n+" ") && strings.Contains(line, "rollout-paused") {
				return true
			}
		}
		return false
	})
	mustSucceed(t, "signal", n, canary, "up")
	// A shorter watch is a change of policy, not of what members run: no new revision, and
	// the rollout stays paused until resumed.
	shorter := writeSpec(t, specPath, "v2-short-watch.yaml", rolloutSpec(n, ", VERSION: '2'", strings.Replace(policy, "5m", "1s", 1)))
	mustSucceed(t, "apply", "-f", shorter)
	if s := statusJSON(t, n); s.Revision != 2 || s.Rollout.State != workflows.RolloutPaused {
		t.Errorf("after a policy change: revision %d, rollout %+v", s.Revision, s.Rollout)
	}
	mustSucceed(t, "rollout", "resume", n)
	if res := cli(t, "rollout", "status", n, "--wait", "--timeout", "3m"); res.Code != 0 {
		t.Fatalf("rollout status --wait after resume: %s", res)
	}
	expectRuns(t, readTrace(t, trace), "upgrade", "", n+"-worker-0", n+"-worker-1", n+"-worker-2", n+"-worker-3")
	mustSucceed(t, "delete", n, "--wait")
}

func TestARollingRestartAndAnActionWithParameters(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "restarted"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - name: worker
    members: 6
    dependsOn: [controller]
    startscript: trace.sh
    events: [configure, addnodes, delnodes, teardown, restart]
    actions: [backup, compact]
    env: {TRACE: TRACE_FILE, RESTART_SLEEP: "0.5", FAIL_EVENT: backup, FAIL_MEMBER: %s-worker-5}
    update: {canaries: 1, maxInFlight: 2, watch: 0s}
`, n, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")

	if res := cli(t, "restart", n, "--role", "controller"); res.Code == 0 || !strings.Contains(res.Stderr, "role controller does not list restart") {
		t.Errorf("restart of a role without restart: %s", res)
	}
	if res := cli(t, "restart", n, "--wait", "--timeout", "2m"); res.Code != 0 || !strings.Contains(res.Stdout, "rolling restart done") {
		t.Fatalf("restart --wait: %s", res)
	}
	restarts := runsOf(readTrace(t, trace), "", "restart")
	expectRuns(t, restarts, "restart", "--restart", n+"-worker-0", n+"-worker-1", n+"-worker-2", n+"-worker-3", n+"-worker-4", n+"-worker-5")
	for _, r := range restarts[1:] {
		if r.Start < restarts[0].End {
			t.Errorf("%s restarted before the canary %s was done", r.Member, restarts[0].Member)
		}
	}
	if most := maxOverlap(restarts); most > 2 {
		t.Errorf("%d restarts ran at once; maxInFlight is 2", most)
	}

	for _, bad := range [][]string{
		{"run", n, "defragment"},
		{"run", n, "backup", "--members", n + "-worker-9"},
		{"run", n, "backup", "--param", "not a pair"},
	} {
		if res := cli(t, bad...); res.Code != 2 {
			t.Errorf("clusterflow %v was not refused as invalid: %s", bad, res)
		}
	}
	res := cli(t, "run", n, "backup", "--members", n+"-worker-1,"+n+"-worker-5", "--param", "target=/backups", "--param", "level=2", "--wait", "--timeout", "2m")
	if res.Code == 0 || !strings.Contains(res.Stdout, "1 succeeded, 1 failed") || !strings.Contains(res.Stdout, "boom") {
		t.Fatalf("run backup on a member that succeeds and one that fails: %s", res)
	}
	backups := runsOf(readTrace(t, trace), "", "backup")
	if got := memberNames(backups); !slices.Equal(got, []string{n + "-worker-1", n + "-worker-5"}) {
		t.Errorf("backup ran on %v", got)
	}
	for _, b := range backups {
		if b.Args != "--action backup --param target=/backups --param level=2" {
			t.Errorf("backup on %s had arguments %q", b.Member, b.Args)
		}
	}
	// The action is done before the operation it ran in is: wait for the phase it ends in.
	var s workflows.ClusterStatus
	waitFor(t, "the cluster ready after the action", func() bool {
		s = statusJSON(t, n)
		return s.Phase == workflows.PhaseReady
	})
	if a := s.Action(1); a == nil || a.Failed != 1 || a.Succeeded != 1 || s.Phase != workflows.PhaseReady {
		t.Errorf("status after the action: phase %s, action %+v", s.Phase, a)
	}
	if res := cli(t, "logs", n, n+"-worker-1", "--event", "backup"); res.Code != 0 || !strings.Contains(res.Stdout, "running backup") {
		t.Errorf("logs --event backup: %s", res)
	}
	mustSucceed(t, "delete", n, "--wait")
}

// TestARolloutSurvivesItsWorkerServerAndAgentBeingKilled kills the worker and the server,
// then the agent, at moments the test does not choose (from the start of the canary to its
// last batch), and checks that the rollout still ends with every worker upgraded exactly
// once.
func TestARolloutSurvivesItsWorkerServerAndAgentBeingKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	n := "rollsurvivor"
	policy := "canaries: 1, maxInFlight: 2, watch: 0s"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	next := writeSpec(t, specPath, "v2.yaml", rolloutSpec(n, ", VERSION: '2', UPGRADE_SLEEP: '1'", policy))
	if res := s.cli("apply", "-f", next); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	waitFor(t, "the canary's upgrade to start", func() bool { return len(runsOf(readTrace(t, trace), "", "upgrade")) > 0 })
	// The rollout takes about 3 s more (3 batches of 1 s): kill somewhere in it.
	time.Sleep(time.Duration(rand.Int64N(int64(2500 * time.Millisecond))))
	s.kill(s.worker)
	s.kill(s.dev)
	s.startDev()
	s.startWorker()
	time.Sleep(time.Duration(rand.Int64N(int64(1500 * time.Millisecond))))
	if agent, ok := testenv.AgentPID(s.data); ok {
		if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if res := s.cli("rollout", "status", n, "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("the rollout did not end: %s\nworker: %s", res, s.worker.Output())
	}
	expectRuns(t, readTrace(t, trace), "upgrade", "--upgrade --from-revision 1 --to-revision 2",
		n+"-worker-0", n+"-worker-1", n+"-worker-2", n+"-worker-3")
	if st := s.status(n); st.Phase != workflows.PhaseReady || !slices.Equal(revisionsOf(st, "worker"), []int{2, 2, 2, 2}) {
		t.Errorf("after the rollout: phase %s (%s), workers on %v", st.Phase, st.Message, revisionsOf(st, "worker"))
	}
}

func TestADeleteMidRolloutStopsItAndLeavesNothing(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "rolldeleted"
	policy := "canaries: 1, maxInFlight: 2, watch: 0s"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	next := writeSpec(t, specPath, "v2.yaml", rolloutSpec(n, ", VERSION: '2', UPGRADE_SLEEP: '30'", policy))
	mustSucceed(t, "apply", "-f", next)
	waitFor(t, "the canary's upgrade to start", func() bool { return len(runsOf(readTrace(t, trace), "", "upgrade")) > 0 })
	mustSucceed(t, "delete", n, "--wait", "--timeout", "90s")
	runs := readTrace(t, trace)
	if upgrades := runsOf(runs, "", "upgrade"); len(upgrades) != 1 || upgrades[0].Outcome == "ok" {
		t.Errorf("upgrades %+v: want the canary's alone, stopped", upgrades)
	}
	if got := len(runsOf(runs, "", "teardown")); got != 7 {
		t.Errorf("%d teardowns, want one for each of the 7 members", got)
	}
	if exists(clusterDir(dataDir, n)) {
		t.Error("the cluster's folder is left after delete")
	}
	waitFor(t, "no script of the cluster left running", func() bool { return len(testenv.MemberProcesses(clusterDir(dataDir, n))) == 0 })
}

// TestAReplaceRolloutTellsTheSurvivorsOnce rolls a role that cannot upgrade in place out by
// replacing its members: each batch's successors set up with the new revision before the
// members they replace are torn down, and the members that live through it hear of each
// newcomer and each leaver once.
func TestAReplaceRolloutTellsTheSurvivorsOnce(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "replaced"
	specFor := func(extra string) string {
		return fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - name: worker
    members: 4
    dependsOn: [controller]
    startscript: trace.sh
    env: {TRACE: TRACE_FILE, DEPS: controller%s}
    update: {canaries: 1, maxInFlight: 2, watch: 0s}
  - {name: edge, members: 2, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`, n, extra)
	}
	specPath, trace := writeCluster(t, specFor(""))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	next := writeSpec(t, specPath, "v2.yaml", specFor(", VERSION: '2'"))
	if res := cli(t, "apply", "-f", next, "--wait", "--timeout", "3m"); res.Code != 0 {
		t.Fatalf("apply v2: %s", res)
	}
	s := statusJSON(t, n)
	var workers []string
	for _, m := range s.Role("worker").Members {
		workers = append(workers, fmt.Sprintf("%s@%d", m.Name, m.Revision))
	}
	if want := []string{n + "-worker-4@2", n + "-worker-5@2", n + "-worker-6@2", n + "-worker-7@2"}; s.Phase != workflows.PhaseReady || !slices.Equal(workers, want) {
		t.Fatalf("after the rollout: phase %s (%s), workers %v, want %v", s.Phase, s.Message, workers, want)
	}
	runs := readTrace(t, trace)
	olds := []string{n + "-worker-0", n + "-worker-1", n + "-worker-2", n + "-worker-3"}
	news := []string{n + "-worker-4", n + "-worker-5", n + "-worker-6", n + "-worker-7"}
	expectRuns(t, runs, "teardown", "--teardown", olds...)
	teardowns := runsOf(runs, "", "teardown")
	configures := map[string]scriptRun{}
	for _, c := range runsOf(runs, n+"-worker-", "configure") {
		configures[c.Member] = c
	}
	for i, old := range olds {
		succ, ok := configures[news[i]]
		td := runsOf(teardowns, old, "")
		if !ok || len(td) != 1 || td[0].Start < succ.End {
			t.Errorf("%s was torn down before its successor %s was set up", old, news[i])
		}
	}
	// Never fewer than 4 - maxUnavailable (50%) workers ready.
	for _, td := range teardowns {
		ready := 0
		for i := range olds {
			if r := runsOf(teardowns, olds[i], ""); len(r) == 0 || r[0].Start >= td.Start && olds[i] != td.Member {
				ready++
			}
			if c, ok := configures[news[i]]; ok && c.End <= td.Start {
				ready++
			}
		}
		if ready < 2 {
			t.Errorf("when %s's teardown began, only %d workers were ready", td.Member, ready)
		}
	}
	for _, survivor := range []string{n + "-controller-0", n + "-edge-0", n + "-edge-1"} {
		for event, nodes := range map[string][]string{"addnodes": news, "delnodes": olds} {
			for _, node := range nodes {
				told := 0
				for _, r := range runsOf(runs, survivor, event) {
					if slices.Contains(strings.Split(strings.TrimPrefix(r.Args, "--"+event+" --role worker --nodes "), ","), node) {
						told++
					}
				}
				if told != 1 {
					t.Errorf("%s heard %s of %s %d times, want once", survivor, event, node, told)
				}
			}
		}
	}
	mustSucceed(t, "delete", n, "--wait")
}

// TestSetChangesOneRolesEnvWithoutASpecFile: `set NAME ROLE env` edits the cluster's
// running spec, with no file to copy: a dry run names the revision and changes nothing;
// the change rolls out as apply's would, and the scripts see it; a value set again changes
// nothing; bad input is refused, naming the field, before anything changes.
func TestSetChangesOneRolesEnvWithoutASpecFile(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "envset"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", "canaries: 1, maxInFlight: 4, watch: 0s"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	before := statusJSON(t, n)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", n, "nope", "env", "A=1"}, `role "nope": cluster envset has no such role (its roles: controller, worker, edge)`},
		{[]string{"set", n, "worker", "env", "CLUSTERFLOW_X=1", "1BAD=x"}, "roles[worker].env.CLUSTERFLOW_X: the CLUSTERFLOW_ prefix is reserved for variables clusterflow sets; roles[worker].env.1BAD: is not a valid environment variable name"},
		{[]string{"set", n, "worker", "env", "NOT_SET-"}, "roles[worker].env.NOT_SET: the role does not set it, so it cannot be removed"},
		{[]string{"set", n, "worker", "env", "junk"}, `"junk" is not NAME=VALUE, or NAME- to remove the variable`},
		{[]string{"set", n, "worker", "limits", "cpu=1"}, "set limits: only env can be set"},
		{[]string{"set", "no-such-cluster", "worker", "env", "A=1"}, "no-such-cluster"},
	} {
		if res := cli(t, tc.args...); res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%v: %s; want refused with %q", tc.args, res, tc.want)
		}
	}

	dry := cli(t, "set", n, "worker", "env", "VERSION=2", "--dry-run")
	if dry.Code != 0 || !strings.Contains(dry.Stdout, "revision 2") || !strings.Contains(dry.Stdout, "1. canary: "+n+"-worker-0") {
		t.Fatalf("set --dry-run: %s", dry)
	}
	if after := statusJSON(t, n); after.Generation != before.Generation || after.Revision != 1 {
		t.Fatalf("refusals or a dry run changed the cluster: generation %d → %d, revision %d", before.Generation, after.Generation, after.Revision)
	}
	if res := cli(t, "set", n, "worker", "env", "VERSION=2", "--wait", "--timeout", "2m"); res.Code != 0 || !strings.Contains(res.Stdout, "revision 2") {
		t.Fatalf("set VERSION=2: %s", res)
	}
	workers := []string{n + "-worker-0", n + "-worker-1", n + "-worker-2", n + "-worker-3"}
	expectRuns(t, readTrace(t, trace), "upgrade", "--upgrade --from-revision 1 --to-revision 2", workers...)
	if res := cli(t, "set", n, "worker", "env", "VERSION=2"); res.Code != 0 || !strings.Contains(res.Stdout, "nothing to do") {
		t.Errorf("set of the value it has: %s", res)
	}
	// The scripts run with what set gave them: told to fail its upgrade, the canary does.
	if res := cli(t, "set", n, "worker", "env", "FAIL_EVENT=upgrade", "FAIL_MEMBER="+n+"-worker-0", "VERSION-"); res.Code != 0 || !strings.Contains(res.Stdout, "revision 3") {
		t.Fatalf("set FAIL_EVENT: %s", res)
	}
	waitFor(t, "the canary's upgrade to revision 3 to fail", func() bool {
		upgrades := runsOf(readTrace(t, trace), n+"-worker-0", "upgrade")
		last := upgrades[len(upgrades)-1]
		return last.Args == "--upgrade --from-revision 2 --to-revision 3" && last.Outcome == "failed"
	})
	if res := cli(t, "revisions", n); res.Code != 0 || strings.Count(res.Stdout, "worker: env") != 2 {
		t.Errorf("revisions: %s", res)
	}
	mustSucceed(t, "delete", n, "--wait")
}
