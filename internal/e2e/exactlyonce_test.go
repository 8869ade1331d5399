package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// Nothing runs twice: each moment of a launch's life (agent.Fault*) is struck by a death of
// the agent, and of the worker and the server with it, for each kind of run (configure,
// upgrade, restart, an action, decommission); every script still runs exactly once.

// exactlyOnceEvents are the runs each moment is tried with: every kind a workflow launches
// (a teardown is a delete's, tried by the last step).
var exactlyOnceEvents = []string{"configure", "upgrade", "restart", "backup", "decommission"}

// exactlyOnceSpec is a cluster of two members that subscribes to every event tried. A run
// whose worker died with its task is taken up again once its heartbeat timeout passes: the
// least allowed here, since what is proven does not hang on its length.
func exactlyOnceSpec(name, env string) string {
	return fmt.Sprintf(`
name: %s
roles:
  - name: m
    members: 2
    startscript: trace.sh
    events: [configure, addnodes, delnodes, teardown, upgrade, restart, decommission]
    actions: [backup]
    heartbeatTimeout: 5s
    update: {canaries: 0, maxInFlight: 2, watch: 0s}
    env: {TRACE: TRACE_FILE%s}
`, name, env)
}

// exactlyOnceLife takes a cluster through every kind of run, calling strike (if set) once
// each has started, and checks that each member ran each script exactly once, to its end.
func exactlyOnceLife(t *testing.T, s *stack, n string, strike func(event string)) {
	t.Helper()
	specPath, trace := writeCluster(t, exactlyOnceSpec(n, ""))
	step := func(event string, settled func(workflows.ClusterStatus) bool, args ...string) {
		t.Helper()
		start := time.Now()
		defer func() { t.Logf("%s: %s took %s", n, event, time.Since(start).Round(10*time.Millisecond)) }()
		if res := s.cli(args...); res.Code != 0 {
			t.Fatalf("%v: %s", args, res)
		}
		if strike != nil {
			strike(event)
		}
		var st workflows.ClusterStatus
		waitUpTo(t, 2*time.Minute, n+": "+event+" done", func() bool {
			st = s.status(n)
			return settled(st)
		})
		if st.Phase != workflows.PhaseReady && st.Phase != workflows.PhaseDeleted {
			t.Fatalf("%s after %s: %s (%s)", n, event, st.Phase, st.Message)
		}
	}
	ready := func(members int) func(workflows.ClusterStatus) bool {
		return func(st workflows.ClusterStatus) bool {
			return st.Settled(st.Generation) && (st.Rollout == nil || st.Rollout.State == workflows.RolloutDone) && len(st.Role("m").Members) == members
		}
	}
	step("configure", ready(2), "deploy", "-f", specPath)
	step("upgrade", func(st workflows.ClusterStatus) bool {
		return ready(2)(st) && st.Rollout != nil && st.Rollout.Revision == 2 && !st.Rollout.Restart
	}, "apply", "-f", writeSpec(t, specPath, "v2.yaml", exactlyOnceSpec(n, ", VERSION: '2'")))
	step("restart", func(st workflows.ClusterStatus) bool {
		return ready(2)(st) && st.Rollout != nil && st.Rollout.Restart
	}, "restart", n)
	step("backup", func(st workflows.ClusterStatus) bool {
		a := st.Action(1)
		return ready(2)(st) && a != nil && a.Succeeded+a.Failed == 2
	}, "run", n, "backup")
	step("decommission", ready(1), "resize", n, "m=1")
	step("teardown", func(st workflows.ClusterStatus) bool { return st.Phase == workflows.PhaseDeleted }, "delete", n)

	runs := readTrace(t, trace)
	both := []string{n + "-m-0", n + "-m-1"}
	for _, event := range []string{"configure", "upgrade", "restart", "backup"} {
		expectRuns(t, runs, event, "", both...)
	}
	expectRuns(t, runs, "decommission", "", n+"-m-1")
	expectRuns(t, runs, "teardown", "", both...)
}

// TestEveryMomentOfALaunchSurvivesTheAgentsDeath kills the agent at each moment of a
// launch's life, for each kind of run: a cluster a moment, side by side, so that each death
// also strikes the other clusters' runs wherever they happen to be.
func TestEveryMomentOfALaunchSurvivesTheAgentsDeath(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	points := []string{agent.FaultSpawned, agent.FaultRecorded, agent.FaultExited, agent.FaultFinished, agent.FaultDelivered}
	var faults []string
	for _, p := range points {
		for _, e := range exactlyOnceEvents {
			faults = append(faults, fmt.Sprintf("%s:%s:xo-%s", p, e, p))
		}
	}
	s.env = append(s.env, agent.FaultEnv+"="+strings.Join(faults, ","))
	s.startWorker()
	// The lives run side by side from goroutines, not as parallel subtests: those would wait
	// for the package's parallel slots while this test's guard counts.
	t.Run("lives", func(t *testing.T) {
		var lives sync.WaitGroup
		for _, p := range points {
			lives.Go(func() {
				t.Run(p, func(t *testing.T) { exactlyOnceLife(t, s, "xo-"+p, nil) })
			})
		}
		lives.Wait()
	})
	// Each fault struck once, where it was set: no run was spared.
	for _, p := range points {
		for _, e := range exactlyOnceEvents {
			fired := filepath.Join(s.data, "agent", "faults", fmt.Sprintf("fired-%s-%s-xo-%s", p, e, p))
			if _, err := os.Stat(fired); err != nil {
				t.Errorf("the agent never reached %s of %s in xo-%s: %v", p, e, p, err)
			}
		}
	}
}

// TestALaunchSurvivesItsWorkerServerAndAgentDyingAtEachMoment holds the agent at a moment
// of a launch's life, for each kind of run, and kills the worker and the server there,
// starts them again, then kills the agent too: the triple kill of a rollout, at moments the
// test chooses rather than by chance.
func TestALaunchSurvivesItsWorkerServerAndAgentDyingAtEachMoment(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	n := "tri"
	moments := map[string]string{
		"configure": agent.FaultSpawned, "upgrade": agent.FaultFinished, "restart": agent.FaultRecorded,
		"backup": agent.FaultDelivered, "decommission": agent.FaultExited,
	}
	var faults []string
	for _, e := range exactlyOnceEvents {
		faults = append(faults, fmt.Sprintf("hold-%s:%s:%s", moments[e], e, n))
	}
	s.env = append(s.env, agent.FaultEnv+"="+strings.Join(faults, ","))
	s.startWorker()
	agentDir := filepath.Join(s.data, "agent")
	exactlyOnceLife(t, s, n, func(event string) {
		point, ok := moments[event]
		if !ok {
			return
		}
		held := agent.HeldFile(agentDir, point, event)
		waitUpTo(t, time.Minute, "the agent held at "+point+" of "+event, func() bool { _, err := os.Stat(held); return err == nil })
		pid, ok := testenv.AgentPID(s.data)
		if !ok {
			t.Fatal("no agent answers while it holds a run")
		}
		s.kill(s.worker)
		s.kill(s.dev)
		s.startDev()
		s.startWorker()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(held)
	})
}

// slowScript's configure writes its process group and the times it starts and ends to the
// trace, and takes 3 s.
const slowScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
echo "start $CLUSTERFLOW_MEMBER $(cut -d' ' -f5 /proc/$$/stat)" >> "$TRACE"
sleep 3
echo "end $CLUSTERFLOW_MEMBER" >> "$TRACE"
`

// TestATrulyLostRunRunsAgainOnce: a run whose processes vanish without an exit status (its
// whole process group killed) is lost, and runs again, as the user guide says; the agent
// dying right after it recorded the loss changes nothing: the run runs exactly twice, the
// first never ending, and the cluster comes up.
func TestATrulyLostRunRunsAgainOnce(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	s.env = append(s.env, agent.FaultEnv+"="+agent.FaultLost+":configure:lost")
	s.startWorker()
	dir := t.TempDir()
	script, trace := filepath.Join(dir, "slow.sh"), filepath.Join(dir, "trace")
	if err := os.WriteFile(script, []byte(slowScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "lost.yaml")
	if err := os.WriteFile(specPath, []byte("name: lost\nroles:\n  - {name: m, members: 1, startscript: "+script+", heartbeatTimeout: 5s, env: {TRACE: "+trace+"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	var pgid int
	waitFor(t, "the configure to start", func() bool {
		data, _ := os.ReadFile(trace)
		f := strings.Fields(string(data))
		if len(f) == 3 && f[0] == "start" {
			pgid, _ = strconv.Atoi(f[2])
		}
		return pgid > 1
	})
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUpTo(t, 2*time.Minute, "lost ready", func() bool { return s.status("lost").Phase == workflows.PhaseReady })
	data, _ := os.ReadFile(trace)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	starts, ends := 0, 0
	for _, l := range lines {
		switch strings.Fields(l)[0] {
		case "start":
			starts++
		case "end":
			ends++
		}
	}
	if starts != 2 || ends != 1 {
		t.Errorf("the lost configure's runs: %q; want it started twice, and ended once", lines)
	}
	if _, err := os.Stat(filepath.Join(s.data, "agent", "faults", "fired-"+agent.FaultLost+"-configure-lost")); err != nil {
		t.Errorf("the agent never recorded the run lost: %v", err)
	}
	if res := s.cli("delete", "lost", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}
