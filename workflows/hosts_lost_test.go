package workflows_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
)

func readyHosts(names ...string) []workflows.Host {
	var hosts []workflows.Host
	for _, n := range names {
		hosts = append(hosts, workflows.Host{HostRegistration: workflows.HostRegistration{Name: n, Address: "10.0.0." + n[1:], Timeout: 10 * time.Second}})
	}
	return hosts
}

// withLost marks the named hosts lost in a view.
func withLost(hosts []workflows.Host, lost ...string) []workflows.Host {
	out := slices.Clone(hosts)
	for i := range out {
		out[i].Lost = slices.Contains(lost, out[i].Name)
	}
	return out
}

// A host is lost while its members are being set up: the worker configuring there, and the
// edge placed there but not started, are set up elsewhere, with the same names, at once;
// nothing more is sent to the lost host; the cluster ends ready without it. When the host
// is back, the sandbox left there is removed (no teardown: the member lives elsewhere), and
// nothing ran twice on its final host.
func TestMembersBeingSetUpOnALostHostAreSetUpElsewhere(t *testing.T) {
	fake := newFakeBackend()
	hosts := readyHosts("h1", "h2", "h3")
	var env *testsuite.TestWorkflowEnvironment
	var loss sync.Once
	var mu sync.Mutex
	canceled := map[string]bool{}
	fake.outcome = func(ctx context.Context, run backend.ScriptRun) runner.Result {
		if strings.HasSuffix(activity.GetInfo(ctx).TaskQueue, "@h2") {
			// h2 dies with its first run: the registry tells the cluster, and nothing
			// comes back from the run but the cancel.
			loss.Do(func() { env.SignalWorkflow(workflows.HostsChangedSignal, withLost(hosts, "h2")) })
			id := activity.GetInfo(ctx).ActivityID
			for done := false; !done; time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				done = canceled[id] || ctx.Err() != nil
				mu.Unlock()
			}
			return runner.Result{Outcome: runner.Canceled}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env = newEnv(t, fake)
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		mu.Lock()
		defer mu.Unlock()
		canceled[info.ActivityID] = true
	})
	env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	var lost workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { lost = query(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.HostsChangedSignal, hosts) }, 2*time.Hour)
	var back workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { back = query(t, env) }, 3*time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: hosts, Spec: testSpec(t, `
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: worker, members: 3, dependsOn: [controller], startscript: s.sh, placement: {maxPerHost: 2}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: s.sh, placement: {maxPerHost: 1}}
`)})

	if lost.Phase != workflows.PhaseReady {
		t.Fatalf("with h2 lost: phase %s (%s), want ready", lost.Phase, lost.Message)
	}
	want := []string{"c-controller-0@h1=ready", "c-worker-0@h1=ready", "c-worker-1@h1=ready", "c-worker-2@h3=ready", "c-edge-0@h1=ready", "c-edge-1@h3=ready"}
	if got := placementsOf(lost); !slices.Equal(got, want) {
		t.Errorf("with h2 lost: placed %v, want %v", got, want)
	}
	calls := fake.Calls()
	lossAt := indexOf(calls, "configure c-worker-1@h2") // the run the loss stopped
	if lossAt < 0 {
		t.Fatalf("c-worker-1 never began on h2: %v", calls)
	}
	for _, c := range calls[lossAt+1:] {
		if strings.Contains(c, "@h2") && !strings.HasPrefix(c, "remove ") {
			t.Errorf("sent to h2 after its loss: %s", c)
		}
	}
	for _, m := range []string{"c-controller-0", "c-worker-0", "c-worker-2", "c-edge-0", "c-edge-1"} {
		if n := countPrefix(calls, "configure "+m+"@"); n != 1 {
			t.Errorf("%s configured %d times, want once", m, n)
		}
	}
	if countCalls(calls, "configure c-worker-1@h1") != 1 {
		t.Errorf("c-worker-1 was not set up on h1 once: %v", calls)
	}
	// Back, h2 loses the sandbox left there; nothing is torn down by script.
	if back.Phase != workflows.PhaseReady || !slices.Equal(placementsOf(back), want) {
		t.Errorf("with h2 back: phase %s, placed %v", back.Phase, placementsOf(back))
	}
	calls = fake.Calls()
	if countCalls(calls, "remove c-worker-1@h2") != 1 || indexOf(calls, "teardown") >= 0 {
		t.Errorf("the stale sandbox on h2: %v", calls)
	}
}

func placementsOf(s workflows.ClusterStatus) []string {
	var out []string
	for _, r := range s.Roles {
		for _, m := range r.Members {
			out = append(out, m.Name+"@"+m.Host+"="+string(m.State))
		}
	}
	return out
}

func countPrefix(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// A reconcile of a cluster on more than hosts.InChildren hosts lists them in listing
// children, groups of up to 500 hosts, and acts on what they found as on its own listing:
// a member whose sandbox is gone is replaced, and a rogue on a host holding no member of
// the cluster is removed. The cluster's own history lists no host.
func TestAReconcileOnHundredsOfHostsListsThemInChildren(t *testing.T) {
	// Soon, not settled: every reconcile lists hundreds of hosts, which the test
	// environment runs one after another.
	const deployed = 30 * time.Second
	fake := newFakeBackend()
	names := hostNames(2*hosts.InChildren + 1)
	view := readyHosts(names...)
	env := newEnv(t, fake)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	var goneHost string
	env.RegisterDelayedCallback(func() {
		m := memberIn(query(t, env), "c-worker-0")
		if m == nil {
			t.Error("c-worker-0 was not deployed")
			return
		}
		goneHost = m.Host
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "worker", Name: "c-worker-0", Host: m.Host}, false)
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "worker", Name: "c-worker-7", Host: names[len(names)-1]}, true)
	}, deployed)
	var before, after workflows.ClusterStatus
	env.RegisterDelayedCallback(func() {
		fake.mu.Lock()
		fake.listers = nil
		fake.mu.Unlock()
	}, deployed-time.Second)
	queryAt(t, env, deployed-time.Second, &before)
	queryAt(t, env, deployed+3*time.Minute, &after) // a reconcile runs every minute
	// A delete ends the run, which would otherwise reconcile for hours.
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.DeleteUpdate, "delete", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("delete refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		})
	}, deployed+4*time.Minute)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: view, Spec: testSpec(t, `
name: c
roles:
  - {name: worker, members: 3, startscript: s.sh, placement: {maxPerHost: 1}}
`)})

	if before.Phase != workflows.PhaseReady {
		t.Fatalf("deployed: phase %s (%s)", before.Phase, before.Message)
	}
	calls := fake.Calls()
	rogue := "remove c-worker-7@" + names[len(names)-1]
	if countCalls(calls, rogue) != 1 {
		t.Errorf("the rogue was not removed once (%s): %v", rogue, calls)
	}
	workers := after.Role("worker").Members
	if memberIn(after, "c-worker-0") != nil || len(workers) != 3 || workers[2].Replaces != "c-worker-0" || workers[2].State != workflows.MemberReady {
		t.Errorf("the member gone from %s was not replaced: %+v", goneHost, workers)
	}
	fake.mu.Lock()
	listers := maps.Clone(fake.listers)
	fake.mu.Unlock()
	if listers[workflows.HostsListingWorkflowName] < len(names) || listers[workflows.ClusterWorkflowName] != 0 {
		t.Errorf("listings by workflow type: %v; want every host listed by %s, none by the cluster", listers, workflows.HostsListingWorkflowName)
	}
	if after.Phase != workflows.PhaseReady {
		t.Errorf("phase %s (%s)", after.Phase, after.Message)
	}
}

// A write of the cluster's files to more than hosts.InChildren hosts runs in writing
// children, groups of up to 500 hosts: the cluster's own history writes to none. A host
// lost while its child waits on its write is told to the child, whose write there is
// cancelled rather than waited on until it times out, and its member is set up elsewhere.
func TestWritesToHundredsOfHostsRunInChildrenThatStopWaitingOnALostHost(t *testing.T) {
	withoutRace(t) // 200 members: 163 s under the race detector, 27 s without
	fake := newFakeBackend()
	names := hostNames(2*hosts.InChildren + 1)
	view := readyHosts(names...)
	const heldOn = "h7"
	var env *testsuite.TestWorkflowEnvironment
	// h7 dies during its first write: the registry tells the cluster, and nothing comes
	// back from the write but the cancel, which must come before its timeout.
	held := holdWrite(fake, heldOn, func() { env.SignalWorkflow(workflows.HostsChangedSignal, withLost(view, heldOn)) })
	env = newEnv(t, fake)
	held.listen(env)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	var deployed workflows.ClusterStatus
	queryAt(t, env, time.Hour, &deployed)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.DeleteUpdate, "delete", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("delete refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		})
	}, 2*time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: view, Spec: memberPerHost(t, len(names)-1)})

	if end := held.ended(); end != "canceled" {
		t.Errorf("the write held on %s ended %s, want canceled", heldOn, end)
	}
	if deployed.Phase != workflows.PhaseReady || deployed.Role("worker").Ready != len(names)-1 {
		t.Fatalf("deployed: phase %s (%s), %d ready", deployed.Phase, deployed.Message, deployed.Role("worker").Ready)
	}
	for _, m := range deployed.Role("worker").Members {
		if m.Host == heldOn {
			t.Errorf("%s stayed on the lost %s", m.Name, heldOn)
		}
	}
	fake.mu.Lock()
	writers := maps.Clone(fake.writers)
	fake.mu.Unlock()
	if writers[workflows.HostsWritingWorkflowName] < len(names)-1 || writers[workflows.ClusterWorkflowName] != 0 {
		t.Errorf("writes by workflow type: %v; want every host written by %s, none by the cluster", writers, workflows.HostsWritingWorkflowName)
	}
}

// A delete while the deploy's writes run in children cancels them: the write held on a
// host ends by its cancel, not its timeout, and the delete completes, leaving nothing on
// any host.
func TestADeleteWhileWritesRunInChildrenCancelsThem(t *testing.T) {
	withoutRace(t)
	d := deployHoldingAWrite(t, func(env *testsuite.TestWorkflowEnvironment) {
		sendUpdate(t, env, workflows.DeleteUpdate, func() {})
	})
	if end := d.held.ended(); end != "canceled" {
		t.Errorf("the write held on %s ended %s, want canceled", heldWriteHost, end)
	}
	var deleted workflows.ClusterStatus
	if err := d.env.GetWorkflowResult(&deleted); err != nil {
		t.Fatalf("the deleted cluster's workflow: %v", err)
	}
	if deleted.Phase != workflows.PhaseDeleted {
		t.Errorf("phase %s (%s), want deleted", deleted.Phase, deleted.Message)
	}
	// The deploy stopped at its first write: no member was made, and the cluster's folder
	// went from every host it may have reached.
	calls := d.fake.Calls()
	if created := countPrefix(calls, "create "); created != 0 {
		t.Errorf("%d members created after the delete cancelled the deploy's first write", created)
	}
	if removed := countCalls(calls, "remove cluster c"); removed != d.hosts {
		t.Errorf("the cluster's folder removed from %d hosts, want all %d", removed, d.hosts)
	}
}

// A cancel while a deploy's writes run in children stops them as a delete does: the held
// write ends by its cancel, no member is made, and the cluster waits, canceled, for what
// comes next (here a delete, which ends the test).
func TestACancelWhileWritesRunInChildrenStopsThem(t *testing.T) {
	withoutRace(t)
	var canceled workflows.ClusterStatus
	d := deployHoldingAWrite(t, func(env *testsuite.TestWorkflowEnvironment) {
		sendUpdate(t, env, workflows.CancelUpdate, func() {
			// The cluster settles after the cancel returns: look an hour later.
			env.RegisterDelayedCallback(func() {
				canceled = query(t, env)
				sendUpdate(t, env, workflows.DeleteUpdate, func() {})
			}, time.Hour)
		})
	})
	if end := d.held.ended(); end != "canceled" {
		t.Errorf("the write held on %s ended %s, want canceled", heldWriteHost, end)
	}
	if canceled.Phase != workflows.PhaseCanceled {
		t.Errorf("after the cancel: phase %s (%s), want canceled", canceled.Phase, canceled.Message)
	}
	if created := countPrefix(d.fake.Calls(), "create "); created != 0 {
		t.Errorf("%d members created after the cancel stopped the deploy's first write", created)
	}
	var deleted workflows.ClusterStatus
	if err := d.env.GetWorkflowResult(&deleted); err != nil || deleted.Phase != workflows.PhaseDeleted {
		t.Errorf("the delete after the cancel: %v, phase %s", err, deleted.Phase)
	}
}

// heldWriteHost is the host whose first write deployHoldingAWrite holds.
const heldWriteHost = "h7"

// heldDeploy is a deploy of a member on each but one of its hosts, past what a cluster
// writes to itself, run to its end.
type heldDeploy struct {
	env   *testsuite.TestWorkflowEnvironment
	fake  *fakeBackend
	held  *heldWrite
	hosts int
}

// deployHoldingAWrite runs the deploy, holding its first write on heldWriteHost until it
// is cancelled; onHeld runs when that write starts.
func deployHoldingAWrite(t *testing.T, onHeld func(*testsuite.TestWorkflowEnvironment)) heldDeploy {
	d := heldDeploy{fake: newFakeBackend()}
	names := hostNames(2*hosts.InChildren + 1)
	d.hosts = len(names)
	d.held = holdWrite(d.fake, heldWriteHost, func() { onHeld(d.env) })
	d.env = newEnv(t, d.fake)
	d.held.listen(d.env)
	d.env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	d.env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: readyHosts(names...), Spec: memberPerHost(t, len(names)-1)})
	return d
}

// sendUpdate sends the update, which must be accepted, and calls done once it completes.
func sendUpdate(t *testing.T, env *testsuite.TestWorkflowEnvironment, name string, done func()) {
	env.UpdateWorkflow(name, name, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("%s refused: %v", name, err) }, OnAccept: func() {},
		OnComplete: func(any, error) { done() },
	})
}

func hostNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("h%d", i+1)
	}
	return names
}

// memberPerHost is a spec of members workers, at most one a host.
func memberPerHost(t *testing.T, members int) spec.Cluster {
	return testSpec(t, fmt.Sprintf(`
name: c
roles:
  - {name: worker, members: %d, startscript: s.sh, placement: {maxPerHost: 1}}
`, members))
}

// heldWrite is the first write of the cluster's files on one host, held until cancelled.
type heldWrite struct {
	mu       sync.Mutex
	canceled map[string]bool
	end      string
}

// holdWrite makes the first write on host call onHeld, then wait until it is cancelled
// (or 30 s pass, which the test reports).
func holdWrite(fake *fakeBackend, host string, onHeld func()) *heldWrite {
	h := &heldWrite{canceled: map[string]bool{}}
	var once sync.Once
	fake.writing = func(ctx context.Context) error {
		info := activity.GetInfo(ctx)
		if !strings.HasSuffix(info.TaskQueue, "@"+host) {
			return nil
		}
		first := false
		once.Do(func() { first = true; onHeld() })
		if !first {
			return nil
		}
		id := info.WorkflowExecution.ID + "/" + info.ActivityID
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			h.mu.Lock()
			wasCanceled := h.canceled[id]
			h.mu.Unlock()
			if wasCanceled || ctx.Err() != nil {
				end := "canceled"
				if !wasCanceled { // its wait on the host ran out instead
					end = ctx.Err().Error()
				}
				h.setEnd(end)
				return context.Canceled
			}
		}
		h.setEnd("not canceled within 30 s")
		return fmt.Errorf("the write on %s was not canceled", host)
	}
	return h
}

// listen notes the activities env cancels.
func (h *heldWrite) listen(env *testsuite.TestWorkflowEnvironment) {
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.canceled[info.WorkflowExecution.ID+"/"+info.ActivityID] = true
	})
}

func (h *heldWrite) setEnd(end string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end = end
}

func (h *heldWrite) ended() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end
}
