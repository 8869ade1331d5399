package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// resizableSpec is a controller and two workers that subscribe to every event. While the
// file TRACE_FILE.hold-controller exists, the controller's configure waits; while
// TRACE_FILE.hold exists, the workers' configures wait.
func resizableSpec(name string) string {
	return fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold-controller}}
  - {name: worker, cardinality: "1+", members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller, HOLD: TRACE_FILE.hold}}
`, name)
}

func memberNames(runs []scriptRun) []string {
	var names []string
	for _, r := range runs {
		names = append(names, r.Member)
	}
	slices.Sort(names)
	return names
}

// expectRuns checks that exactly the given members ran the event, each once, with args.
func expectRuns(t *testing.T, runs []scriptRun, event, args string, members ...string) {
	t.Helper()
	got := runsOf(runs, "", event)
	slices.Sort(members)
	if !slices.Equal(memberNames(got), members) {
		t.Errorf("%s ran on %v, want exactly %v; the runs: %+v", event, memberNames(got), members, got)
	}
	for _, r := range got {
		if args != "" && r.Args != args {
			t.Errorf("%s on %s had arguments %q, want %q", event, r.Member, r.Args, args)
		}
		if r.Outcome != "ok" {
			t.Errorf("%s on %s did not finish: %+v", event, r.Member, r)
		}
	}
}

func memberStates(s workflows.ClusterStatus, role string) []string {
	var states []string
	for _, m := range s.Role(role).Members {
		states = append(states, m.Name+"="+string(m.State))
	}
	return states
}

// TestResizeGrowsAndShrinksWithNotifications runs twice: as is, and with the cluster
// workflow continuing as new after every operation, which must change nothing users see.
func TestResizeGrowsAndShrinksWithNotifications(t *testing.T) {
	t.Parallel()
	guard(t)
	for _, tc := range []struct {
		name               string
		continueAsNewEvery string
	}{{"resized", "0"}, {"resized-can", "1"}} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.name
			specPath, trace := writeCluster(t, resizableSpec(n))
			mustSucceed(t, "deploy", "-f", specPath, "--wait", "--continue-as-new-every", tc.continueAsNewEvery)

			res := cli(t, "resize", n, "worker=4", "--wait", "--timeout", "90s")
			if res.Code != 0 || !strings.Contains(res.Stdout, "worker 2 → 4 (generation 2)") {
				t.Fatalf("resize worker=4: %s", res)
			}
			runs := readTrace(t, trace)
			expectRuns(t, runs, "configure", "--configure", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2", n+"-worker-3")
			expectRuns(t, runs, "addnodes", fmt.Sprintf("--addnodes --role worker --nodes %s-worker-2,%s-worker-3", n, n),
				n+"-controller-0", n+"-worker-0", n+"-worker-1")
			s := statusJSON(t, n)
			if s.Phase != workflows.PhaseReady || s.Generation != 2 || s.ReachedGeneration != 2 || s.Role("worker").Ready != 4 || s.Role("worker").Desired != 4 {
				t.Errorf("after growing: phase %s, generation %d reached %d, workers %v", s.Phase, s.Generation, s.ReachedGeneration, memberStates(s, "worker"))
			}

			res = cli(t, "resize", n, "worker=1", "--wait", "--timeout", "90s")
			if res.Code != 0 || !strings.Contains(res.Stdout, "worker 4 → 1 (generation 3)") {
				t.Fatalf("resize worker=1: %s", res)
			}
			runs = readTrace(t, trace)
			expectRuns(t, runs, "teardown", "--teardown", n+"-worker-1", n+"-worker-2", n+"-worker-3")
			expectRuns(t, runs, "delnodes", fmt.Sprintf("--delnodes --role worker --nodes %s-worker-1,%s-worker-2,%s-worker-3", n, n, n),
				n+"-controller-0", n+"-worker-0")
			for _, teardown := range runsOf(runs, "", "teardown") {
				for _, delnodes := range runsOf(runs, "", "delnodes") {
					if delnodes.Start < teardown.End {
						t.Errorf("delnodes on %s started before %s was torn down", delnodes.Member, teardown.Member)
					}
				}
			}
			s = statusJSON(t, n)
			if s.Phase != workflows.PhaseReady || s.Generation != 3 || s.ReachedGeneration != 3 ||
				!slices.Equal(memberStates(s, "worker"), []string{n + "-worker-0=ready"}) {
				t.Errorf("after shrinking: phase %s, generation %d reached %d, workers %v", s.Phase, s.Generation, s.ReachedGeneration, memberStates(s, "worker"))
			}
			folder := clusterDir(dataDir, n)
			for i, want := range []bool{true, false, false, false} {
				if got := exists(filepath.Join(folder, fmt.Sprintf("%s-worker-%d", n, i))); got != want {
					t.Errorf("sandbox of worker-%d exists: %v, want %v", i, got, want)
				}
			}
			if tc.continueAsNewEvery == "1" {
				started := history(t, workflows.ClusterWorkflowID(n))[0].GetWorkflowExecutionStartedEventAttributes()
				if started.GetContinuedExecutionRunId() == "" {
					t.Error("the cluster workflow never continued as new")
				}
			}
			// However many runs the workflow had, the cluster is listed once.
			waitFor(t, "list to show the cluster once, ready", func() bool {
				res := cli(t, "list", "--all")
				return res.Code == 0 && strings.Count(res.Stdout, n+" ") == 1 && strings.Contains(res.Stdout, "ready")
			})
			mustSucceed(t, "delete", n, "--wait")
			if exists(folder) {
				t.Error("sandboxes left after delete")
			}
		})
	}
}

func TestBadResizesAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, resizableSpec("refusing"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	before := statusJSON(t, "refusing")
	events := countEvents(t, workflows.ClusterWorkflowID("refusing"))
	for _, tc := range []struct{ arg, want string }{
		{"controller=2", `controller=2 refused: role controller has cardinality "1"`},
		{"worker=0", `worker=0 refused: role worker has cardinality "1+"`},
		{"db=1", `db=1 refused: cluster refusing has no role "db" (its roles: controller, worker)`},
		{"worker=-1", "worker=-1 refused: a member count cannot be negative"},
		{"worker=many", `"worker=many" is not ROLE=N`},
	} {
		if res := cli(t, "resize", "refusing", tc.arg); res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("resize %s: want exit 2 and %q, got %s", tc.arg, tc.want, res)
		}
	}
	after := statusJSON(t, "refusing")
	if after.Generation != before.Generation || after.AttemptedGeneration != before.AttemptedGeneration ||
		!slices.Equal(memberStates(after, "worker"), memberStates(before, "worker")) || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("refused resizes changed the status:\nbefore %+v\nafter  %+v", before, after)
	}
	if n := countEvents(t, workflows.ClusterWorkflowID("refusing")); n != events {
		t.Errorf("refused resizes wrote %d events to the history", n-events)
	}
	if res := cli(t, "resize", "no-such-cluster", "worker=1"); res.Code != 2 || !strings.Contains(res.Stderr, "not found") {
		t.Errorf("resize of an unknown cluster: %s", res)
	}
	mustSucceed(t, "delete", "refusing", "--wait")
	if res := cli(t, "resize", "refusing", "worker=3"); res.Code != 2 || !strings.Contains(res.Stderr, "is deleted") {
		t.Errorf("resize of a deleted cluster: %s", res)
	}
}

func TestResizeDuringALongConfigureIsAcceptedAtOnce(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, resizableSpec("growing"))
	hold := trace + ".hold-controller"
	holdOn(t, hold)
	mustSucceed(t, "deploy", "-f", specPath)
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	// Two resizes in a row: they apply in the order they arrived, so the last one wins.
	res := cli(t, "resize", "growing", "worker=5")
	if res.Code != 0 || !strings.Contains(res.Stdout, "worker 2 → 5 (generation 2)") {
		t.Fatalf("resize during the controller's configure: %s", res)
	}
	res = cli(t, "resize", "growing", "worker=3")
	if res.Code != 0 || !strings.Contains(res.Stdout, "worker 5 → 3 (generation 3)") {
		t.Fatalf("second resize during the controller's configure: %s", res)
	}
	if c := runsOf(readTrace(t, trace), "growing-controller-0", "configure"); len(c) != 1 || c[0].Outcome != "" {
		t.Fatalf("the resizes should be accepted while the controller's configure runs: %+v", c)
	}
	s := statusJSON(t, "growing")
	if s.Generation != 3 || s.ReachedGeneration != 0 || s.Role("worker").Desired != 3 {
		t.Errorf("status during setup: generation %d reached %d, desired workers %d", s.Generation, s.ReachedGeneration, s.Role("worker").Desired)
	}
	release(t, hold)
	mustSucceed(t, "status", "growing", "--wait", "--timeout", "90s")
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "--configure", "growing-controller-0", "growing-worker-0", "growing-worker-1", "growing-worker-2")
	controller := runsOf(runs, "growing-controller-0", "configure")[0]
	for _, w := range runsOf(runs, "growing-worker-", "configure") {
		if w.Start < controller.End {
			t.Errorf("%s started at %.3f, before the controller finished at %.3f", w.Member, w.Start, controller.End)
		}
	}
	// The controller configured before worker-2 existed, so it hears of it; the workers
	// configured together and know each other from configmeta.
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes growing-worker-2", "growing-controller-0")
	s = statusJSON(t, "growing")
	if s.Phase != workflows.PhaseReady || s.ReachedGeneration != 3 || s.Role("worker").Ready != 3 {
		t.Errorf("final: phase %s, reached %d, workers %v", s.Phase, s.ReachedGeneration, memberStates(s, "worker"))
	}
	mustSucceed(t, "delete", "growing", "--wait")
}

func TestCancelLeavesAStableClusterThatCanBeResizedAndDeleted(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, resizableSpec("canceled"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	if res := cli(t, "cancel", "canceled"); res.Code != 2 || !strings.Contains(res.Stderr, "nothing to cancel, cluster canceled is ready") {
		t.Errorf("cancel with nothing running: %s", res)
	}
	hold := trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "resize", "canceled", "worker=4")
	waitFor(t, "the new workers' configures to start", func() bool {
		return len(runsOf(readTrace(t, trace), "", "configure")) == 5
	})
	res := cli(t, "cancel", "canceled", "--wait", "--timeout", "60s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "is canceled: stopped at generation 2 by a cancel: 2 members canceled, 0 not started") {
		t.Fatalf("cancel --wait: %s", res)
	}
	s := statusJSON(t, "canceled")
	want := []string{"canceled-worker-0=ready", "canceled-worker-1=ready", "canceled-worker-2=config_error", "canceled-worker-3=config_error"}
	if s.Phase != workflows.PhaseCanceled || !slices.Equal(memberStates(s, "worker"), want) {
		t.Errorf("after cancel: phase %s, workers %v, want %v", s.Phase, memberStates(s, "worker"), want)
	}
	for _, m := range s.Role("worker").Members[2:] {
		if m.Detail != "canceled" {
			t.Errorf("%s detail %q, want canceled", m.Name, m.Detail)
		}
		if pids := testenv.MemberProcesses(filepath.Join(clusterDir(dataDir, "canceled"), m.Name)); len(pids) > 0 {
			t.Errorf("%s still has processes after cancel: %v", m.Name, pids)
		}
	}
	release(t, hold)
	mustSucceed(t, "resize", "canceled", "worker=2", "--wait", "--timeout", "90s")
	s = statusJSON(t, "canceled")
	if s.Phase != workflows.PhaseReady || !slices.Equal(memberStates(s, "worker"), want[:2]) {
		t.Errorf("resize after cancel: phase %s (%s), workers %v", s.Phase, s.Message, memberStates(s, "worker"))
	}
	mustSucceed(t, "delete", "canceled", "--wait")
	if exists(clusterDir(dataDir, "canceled")) {
		t.Error("sandboxes left after delete")
	}
}

func TestApplyAddsAndRemovesRolesAndRefusesReconfiguring(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: applied
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	grown := writeSpec(t, specPath, "grown.yaml", `
name: applied
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: "controller worker"}}
`)
	res := cli(t, "apply", "-f", grown, "--wait", "--timeout", "90s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "worker 1 → 2, +edge (2) (generation 2)") {
		t.Fatalf("apply grown.yaml: %s", res)
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "--configure", "applied-controller-0", "applied-worker-0", "applied-worker-1", "applied-edge-0", "applied-edge-1")
	newWorker := runsOf(runs, "applied-worker-1", "configure")[0]
	for _, e := range runsOf(runs, "applied-edge-", "configure") {
		if e.Start < newWorker.End {
			t.Errorf("%s started before the new worker was ready", e.Member)
		}
	}
	// The members that were there hear of both roles' newcomers; newcomers hear of none.
	addnodes := runsOf(runs, "", "addnodes")
	if got := memberNames(addnodes); !slices.Equal(got, []string{"applied-controller-0", "applied-controller-0", "applied-worker-0", "applied-worker-0"}) {
		t.Errorf("addnodes ran on %v", got)
	}
	for _, args := range []string{"--addnodes --role worker --nodes applied-worker-1", "--addnodes --role edge --nodes applied-edge-0,applied-edge-1"} {
		if n := len(slices.DeleteFunc(slices.Clone(addnodes), func(r scriptRun) bool { return r.Args != args })); n != 2 {
			t.Errorf("%d runs of %q, want 2", n, args)
		}
	}

	reconfigured := writeSpec(t, specPath, "reconfigured.yaml", `
name: applied
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, cardinality: "2", dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: "controller worker"}}
`)
	if res := cli(t, "apply", "-f", reconfigured); res.Code != 2 || !strings.Contains(res.Stderr, "role worker refused: it has members, so its cardinality cannot change") {
		t.Errorf("apply changing a running role's cardinality: %s", res)
	}
	if s := statusJSON(t, "applied"); s.Generation != 2 {
		t.Errorf("a refused apply moved the generation to %d", s.Generation)
	}

	shrunk := writeSpec(t, specPath, "shrunk.yaml", `
name: applied
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
`)
	mustSucceed(t, "apply", "-f", shrunk, "--wait", "--timeout", "90s")
	runs = readTrace(t, trace)
	expectRuns(t, runs, "teardown", "--teardown", "applied-edge-0", "applied-edge-1")
	expectRuns(t, runs, "delnodes", "--delnodes --role edge --nodes applied-edge-0,applied-edge-1",
		"applied-controller-0", "applied-worker-0", "applied-worker-1")
	s := statusJSON(t, "applied")
	if s.Phase != workflows.PhaseReady || s.Role("edge") != nil || len(s.Levels) != 2 {
		t.Errorf("after removing edge: phase %s, levels %v, edge %+v", s.Phase, s.Levels, s.Role("edge"))
	}
	mustSucceed(t, "delete", "applied", "--wait")
}

// shrinkDuringSetup deploys four workers whose configures hold, shrinks to one while they
// run, checks that the three no longer wanted are stopped at once, then lets setup finish.
func shrinkDuringSetup(t *testing.T, name string) []scriptRun {
	t.Helper()
	specPath, trace := writeCluster(t, strings.Replace(resizableSpec(name), "members: 2", "members: 4", 1))
	hold := trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "deploy", "-f", specPath)
	waitFor(t, "the workers' configures to start", func() bool { return len(runsOf(readTrace(t, trace), "", "configure")) == 5 })
	mustSucceed(t, "resize", name, "worker=1")
	waitFor(t, "the unwanted workers to be stopped", func() bool {
		states := memberStates(statusJSON(t, name), "worker")
		return slices.Equal(states[1:], []string{name + "-worker-1=config_error", name + "-worker-2=config_error", name + "-worker-3=config_error"})
	})
	for i := 1; i <= 3; i++ {
		if pids := testenv.MemberProcesses(filepath.Join(clusterDir(dataDir, name), fmt.Sprintf("%s-worker-%d", name, i))); len(pids) > 0 {
			t.Errorf("worker-%d still runs after it was no longer wanted: %v", i, pids)
		}
	}
	if s := statusJSON(t, name); s.Role("worker").Members[0].State != workflows.MemberConfiguring {
		t.Errorf("the wanted worker should still be configuring: %+v", s.Role("worker").Members[0])
	}
	release(t, hold)
	mustSucceed(t, "status", name, "--wait", "--timeout", "90s")
	return readTrace(t, trace)
}

func TestShrinkDuringSetupStopsMembersNoLongerWanted(t *testing.T) {
	t.Parallel()
	guard(t)
	runs := shrinkDuringSetup(t, "shrinking")
	s := statusJSON(t, "shrinking")
	if s.Phase != workflows.PhaseReady || !slices.Equal(memberStates(s, "worker"), []string{"shrinking-worker-0=ready"}) {
		t.Errorf("final: phase %s (%s), workers %v", s.Phase, s.Message, memberStates(s, "worker"))
	}
	for _, r := range runsOf(runs, "shrinking-worker-", "configure") {
		if finished := r.Outcome == "ok"; finished != (r.Member == "shrinking-worker-0") {
			t.Errorf("configure of %s: outcome %q; only worker-0's should finish", r.Member, r.Outcome)
		}
	}
	expectRuns(t, runs, "teardown", "--teardown", "shrinking-worker-1", "shrinking-worker-2", "shrinking-worker-3")
	mustSucceed(t, "delete", "shrinking", "--wait")
}

func TestAFailedNotificationMarksItsMemberAndIsNotRetried(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: notified
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: notified-worker-0}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	res := cli(t, "resize", "notified", "worker=3", "--wait", "--timeout", "90s")
	if res.Code != 1 || !strings.Contains(res.Stderr, "cluster notified failed: role worker failed: 1 of 3 members in config_error") ||
		!strings.Contains(res.Stdout, "boom: notified-worker-0 cannot start") {
		t.Fatalf("resize with a failing addnodes: want exit 1 with the output, got %s", res)
	}
	runs := readTrace(t, trace)
	if failed := runsOf(runs, "notified-worker-0", "addnodes"); len(failed) != 1 || failed[0].Outcome != "failed" {
		t.Errorf("the failing addnodes should run exactly once: %+v", failed)
	}
	expectRuns(t, runsOf(runs, "notified-controller-", ""), "addnodes", "--addnodes --role worker --nodes notified-worker-2", "notified-controller-0")
	s := statusJSON(t, "notified")
	m := s.Role("worker").Members[0]
	if s.Phase != workflows.PhaseFailed || m.State != workflows.MemberConfigError || m.Event != "addnodes" ||
		!strings.HasPrefix(m.Detail, "addnodes: ") || !strings.Contains(m.StderrTail, "boom") {
		t.Errorf("after a failed addnodes: phase %s, worker-0 %+v", s.Phase, m)
	}
	if s.Role("worker").Ready != 2 {
		t.Errorf("the new worker and worker-1 should be ready: %v", memberStates(s, "worker"))
	}
	mustSucceed(t, "delete", "notified", "--wait")
}

// growDuringSetup deploys two workers whose configures hold, grows to four while they
// run, checks that the new ones start at once, then lets setup finish.
func growDuringSetup(t *testing.T, name string) []scriptRun {
	t.Helper()
	specPath, trace := writeCluster(t, resizableSpec(name))
	hold := trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "deploy", "-f", specPath)
	waitFor(t, "the workers' configures to start", func() bool { return len(runsOf(readTrace(t, trace), "", "configure")) == 3 })
	mustSucceed(t, "resize", name, "worker=4")
	// The first two workers still hold, yet the new ones start: they need not wait for them.
	waitFor(t, "the new workers' configures to start", func() bool { return len(runsOf(readTrace(t, trace), "", "configure")) == 5 })
	release(t, hold)
	mustSucceed(t, "status", name, "--wait", "--timeout", "90s")
	return readTrace(t, trace)
}

func TestGrowDuringSetupStartsTheNewMembersAtOnce(t *testing.T) {
	t.Parallel()
	guard(t)
	runs := growDuringSetup(t, "joining")
	expectRuns(t, runs, "configure", "--configure", "joining-controller-0", "joining-worker-0", "joining-worker-1", "joining-worker-2", "joining-worker-3")
	// Those that configured before the resize hear of the new workers; these knew everyone.
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes joining-worker-2,joining-worker-3",
		"joining-controller-0", "joining-worker-0", "joining-worker-1")
	s := statusJSON(t, "joining")
	if s.Phase != workflows.PhaseReady || s.Role("worker").Ready != 4 || s.ReachedGeneration != 2 {
		t.Errorf("final: phase %s (%s), reached %d, workers %v", s.Phase, s.Message, s.ReachedGeneration, memberStates(s, "worker"))
	}
	mustSucceed(t, "delete", "joining", "--wait")
}

func TestChangesToAClusterBeingDeletedAreRefused(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: leaving
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD_TEARDOWN: TRACE_FILE.hold}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	hold := trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "delete", "leaving")
	waitFor(t, "the controller's teardown to start", func() bool { return len(runsOf(readTrace(t, trace), "leaving-controller-0", "teardown")) == 1 })
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resize", "leaving", "worker=3"}, "resize refused: cluster leaving is being deleted"},
		{[]string{"apply", "-f", specPath}, "apply refused: cluster leaving is being deleted"},
		{[]string{"cancel", "leaving"}, "cancel refused: cluster leaving is being deleted"},
	} {
		if res := cli(t, tc.args...); res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%v: want exit 2 and %q, got %s", tc.args, tc.want, res)
		}
	}
	// A second delete is accepted and changes nothing.
	if res := cli(t, "delete", "leaving"); res.Code != 0 || !strings.Contains(res.Stdout, "Deleting cluster leaving") {
		t.Errorf("second delete: %s", res)
	}
	release(t, hold)
	mustSucceed(t, "delete", "leaving", "--wait")
	if n := len(runsOf(readTrace(t, trace), "", "teardown")); n != 3 {
		t.Errorf("%d teardowns ran, want one per member", n)
	}
}

func TestApplyCannotBringBackARoleStillBeingRemoved(t *testing.T) {
	t.Parallel()
	guard(t)
	withEdge := `
name: returning
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: edge, members: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD_TEARDOWN: TRACE_FILE.hold}}
`
	specPath, trace := writeCluster(t, withEdge)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	hold := trace + ".hold"
	holdOn(t, hold)
	withoutEdge := writeSpec(t, specPath, "without-edge.yaml", `
name: returning
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "apply", "-f", withoutEdge)
	waitFor(t, "the edge's teardown to start", func() bool { return len(runsOf(readTrace(t, trace), "returning-edge-0", "teardown")) == 1 })
	if res := cli(t, "apply", "-f", specPath); res.Code != 2 || !strings.Contains(res.Stderr, "role edge refused: it is still being removed") {
		t.Errorf("apply bringing the edge back during its teardown: %s", res)
	}
	release(t, hold)
	mustSucceed(t, "status", "returning", "--wait", "--timeout", "60s")
	if s := statusJSON(t, "returning"); s.Role("edge") != nil || s.Generation != 2 {
		t.Errorf("after removing the edge: generation %d, edge %+v", s.Generation, s.Role("edge"))
	}
	// Once it is gone, it may come back.
	mustSucceed(t, "apply", "-f", specPath, "--wait", "--timeout", "60s")
	mustSucceed(t, "delete", "returning", "--wait")
}

// TestResizeRemoveTakesTheNamedMembersAway: resize --remove names the members that leave,
// rather than the highest ordinals, through the same teardown and delnodes as any shrink;
// its dry run names them; a shrink past the role's cardinality, or a count given for the
// same role, is refused by name, changing nothing.
func TestResizeRemoveTakesTheNamedMembersAway(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "removing"
	specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, cardinality: "2+", members: 3, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	first := n + "-worker-0"

	if res := cli(t, "resize", n, "--remove", first, "--dry-run"); res.Code != 0 || !strings.Contains(res.Stdout, "worker 3 → 2") || !strings.Contains(res.Stdout, first) || strings.Contains(res.Stdout, n+"-worker-2") {
		t.Errorf("the dry run does not name %s alone as leaving:\n%s", first, res)
	}
	if res := cli(t, "resize", n, "--remove", first+","+n+"-worker-1"); res.Code != 2 || !strings.Contains(res.Stderr, `--remove refused: role worker would keep 1 member, and its cardinality is "2+"`) {
		t.Errorf("a removal past the role's cardinality was not refused by name: %s", res)
	}
	if res := cli(t, "resize", n, "worker=2", "--remove", first); res.Code != 2 || !strings.Contains(res.Stderr, "give one or the other for role worker") {
		t.Errorf("a count and a removal for one role were not refused: %s", res)
	}
	if runs := readTrace(t, trace); len(runsOf(runs, "", "teardown")) != 0 {
		t.Fatalf("a refused removal tore members down: %+v", runs)
	}

	res := cli(t, "resize", n, "--remove", first, "--wait", "--timeout", "90s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "worker 3 → 2 (generation 2)") {
		t.Fatalf("resize --remove %s: %s", first, res)
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "teardown", "--teardown", first)
	expectRuns(t, runs, "delnodes", fmt.Sprintf("--delnodes --role worker --nodes %s", first), n+"-controller-0", n+"-worker-1", n+"-worker-2")
	if s := statusJSON(t, n); s.Phase != workflows.PhaseReady || !slices.Equal(memberStates(s, "worker"), []string{n + "-worker-1=ready", n + "-worker-2=ready"}) {
		t.Errorf("after resize --remove %s: phase %s, workers %v", first, s.Phase, memberStates(s, "worker"))
	}
	mustSucceed(t, "delete", n, "--wait")
}
