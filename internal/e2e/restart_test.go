package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// slowController is a cluster whose controller takes about 6s to configure, long enough to
// kill something while it runs; the workers check the controller is ready first.
const slowController = `
name: slow
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "6"}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}}
`

// deployAndInterrupt deploys slowController, calls interrupt while the controller's
// configure runs, and checks the cluster still becomes ready with every configure run
// exactly once, the workers' after the controller's.
func deployAndInterrupt(t *testing.T, s *stack, interrupt func()) {
	specPath, trace := writeCluster(t, slowController)
	s.trace = trace
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	interrupt()
	res := s.cli("status", "slow", "--wait", "--timeout", "90s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "ready") {
		t.Fatalf("cluster did not become ready: %s\nworker: %s\ndev: %s", res, s.worker.Output(), s.dev.Output())
	}
	runs := readTrace(t, trace)
	controller := runsOf(runs, "slow-controller-", "configure")
	if len(controller) != 1 || controller[0].Outcome != "ok" {
		t.Fatalf("the controller's configure should have run once, to its end: %+v", runs)
	}
	workers := runsOf(runs, "slow-worker-", "configure")
	if len(workers) != 2 {
		t.Fatalf("want one configure per worker, got %+v", workers)
	}
	for _, w := range workers {
		if w.Start < controller[0].End || w.Outcome != "ok" {
			t.Errorf("worker configure %+v not after the controller's (ended %.3f)", w, controller[0].End)
		}
	}
	// The first attempt's result arrived: nothing waited for a heartbeat timeout and a retry.
	for _, e := range s.history("cluster/slow/configure-1/controller") {
		if started := e.GetActivityTaskStartedEventAttributes(); started != nil && started.GetAttempt() != 1 {
			t.Errorf("the controller's configure needed attempt %d: %v", started.GetAttempt(), started.GetLastFailure())
		}
		if e.GetActivityTaskTimedOutEventAttributes() != nil {
			t.Errorf("the controller's configure timed out: %v", e.GetActivityTaskTimedOutEventAttributes().GetFailure())
		}
	}
}

func TestAScriptSurvivesItsWorkerBeingKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	deployAndInterrupt(t, s, func() {
		s.kill(s.worker)
		if len(testenv.MemberProcesses(s.data)) == 0 {
			t.Error("killing the worker killed the running script")
		}
		s.startWorker()
	})
}

func TestADeployResumesAfterTheServerIsKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	killServerMidDeploy(t, newStack(t))
}

// TestADeployResumesAfterThePostgresServerIsKilled is the same on the production path:
// Temporal's own server on PostgreSQL, killed with SIGKILL.
func TestADeployResumesAfterThePostgresServerIsKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newProductionStack(t)
	s.startWorker()
	killServerMidDeploy(t, s)
}

func killServerMidDeploy(t *testing.T, s *stack) {
	deployAndInterrupt(t, s, func() {
		s.kill(s.dev)
		// The script ends while the server is down: the agent keeps its result and
		// delivers it once the server is back.
		waitFor(t, "the controller's configure to end", func() bool {
			runs := readTrace(t, s.trace)
			return len(runs) > 0 && runs[0].Outcome != ""
		})
		s.startDev()
	})
}

func TestARestartedAgentReadoptsItsRun(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	deployAndInterrupt(t, s, func() {
		first, ok := testenv.AgentPID(s.data)
		if !ok {
			t.Fatal("no agent running the script")
		}
		if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The worker brings a new agent up, and it carries on with the run.
		waitFor(t, "a new agent", func() bool { pid, ok := testenv.AgentPID(s.data); return ok && pid != first })
	})
}

func TestARetriedLaunchAttachesToTheRunningScript(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	specPath, trace := writeCluster(t, `
name: frozen
roles:
  - {name: controller, cardinality: "1", heartbeatTimeout: 8s, startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "18"}}
`)
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	// A frozen agent sends no heartbeats, so the attempt times out and is retried; the
	// relaunch reaches the agent once it thaws, and must attach to the script still running.
	agentPID, ok := testenv.AgentPID(s.data)
	if !ok {
		t.Fatal("no agent")
	}
	if err := syscall.Kill(agentPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The first attempt times out at 8s and the retry starts about a second later, with its
	// own 8s: thawing at 12s leaves the server time to notice the first timeout, even when
	// busy, and the agent time to heartbeat for the retry.
	time.Sleep(12 * time.Second)
	if err := syscall.Kill(agentPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("status", "frozen", "--wait", "--timeout", "60s"); res.Code != 0 || !strings.Contains(res.Stdout, "ready") {
		t.Fatalf("cluster did not become ready: %s", res)
	}
	if runs := runsOf(readTrace(t, trace), "frozen-controller-", "configure"); len(runs) != 1 || runs[0].Outcome != "ok" {
		t.Fatalf("the controller's configure should have run once, to its end: %+v", runs)
	}
	retried := false
	for _, e := range s.history("cluster/frozen/configure-1/controller") {
		if started := e.GetActivityTaskStartedEventAttributes(); started != nil && started.GetAttempt() > 1 {
			retried = true
		}
	}
	if !retried {
		t.Error("the configure was never retried, so no relaunch was tested")
	}
}

func TestAResizeSurvivesItsWorkerAndServerBeingKilled(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	specPath, trace := writeCluster(t, resizableSpec("survivor"))
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	hold := trace + ".hold"
	holdOn(t, hold)
	if res := s.cli("resize", "survivor", "worker=4"); res.Code != 0 {
		t.Fatalf("resize: %s", res)
	}
	waitFor(t, "the new workers' configures to start", func() bool { return len(runsOf(readTrace(t, trace), "", "configure")) == 5 })
	s.kill(s.worker)
	s.kill(s.dev)
	// The new workers finish while nothing of clusterflow but the agent runs.
	release(t, hold)
	waitFor(t, "the new workers' configures to end", func() bool {
		runs := runsOf(readTrace(t, trace), "", "configure")
		return len(runs) == 5 && runs[3].Outcome != "" && runs[4].Outcome != ""
	})
	s.startDev()
	s.startWorker()
	if res := s.cli("status", "survivor", "--wait", "--timeout", "90s"); res.Code != 0 || !strings.Contains(res.Stdout, "ready") {
		t.Fatalf("cluster did not become ready: %s\nworker: %s", res, s.worker.Output())
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "--configure", "survivor-controller-0", "survivor-worker-0", "survivor-worker-1", "survivor-worker-2", "survivor-worker-3")
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes survivor-worker-2,survivor-worker-3",
		"survivor-controller-0", "survivor-worker-0", "survivor-worker-1")
}
