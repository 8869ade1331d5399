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

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/internal/testlimit"
	"github.com/clusterflow/clusterflow/workflows"
)

// A fleet past what one registry workflow could hold: Temporal refuses a workflow more than
// 2,000 pending activities, and each host holds a lease, so before shards no fleet of
// 2,001 hosts could register. 2,020 simulated hosts (`clusterflow simulate`, a worker each
// on its own task queue) register, a cluster spreads one member per host over 150 of
// them, the 1% that run in a process of their own die at once, and their members are
// replaced on the others; no workflow of the registry holds more than a shard's hosts'
// leases or a long history. The hosts take the machine: `make test` runs this test in a
// step of its own, after the others (it took past its three minutes beside the race
// detector's unit tests), and within the e2e package it runs alone (no t.Parallel).
func TestAFleetPastOneWorkflowsPendingActivitiesRegistersAndReplacesLostHosts(t *testing.T) {
	guardFor(t, fleetTestLimit())
	const kept, doomed = 1999, 21
	// Past hosts.InChildren member hosts, so that children write the cluster's files.
	const members = 150
	s := newServerStack(t)
	s.startWorker()
	// The doomed hosts' names sort first, so that placement (hosts in name order) puts
	// members on them; they time out in 10 s, the others in 5 minutes, which keeps the
	// leases' heartbeats light.
	lost := simulate(t, s, "sim-doomed", "sim-0", doomed, 10*time.Second)
	others := simulate(t, s, "sim-kept", "sim-k", kept, 5*time.Minute)
	started := time.Now()
	// Each process says when all its hosts are registered; asking `hosts` all along would
	// only load the server with queries of every shard.
	for _, p := range []*testenv.Process{lost, others} {
		if err := p.WaitFor("Simulating hosts", 150*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var hosts []workflows.HostDocument
	waitEvery(t, time.Minute, time.Second, fmt.Sprintf("%d hosts ready", kept+doomed), func() (bool, string) {
		hosts = fleetHosts(t, s)
		return hostsIn(hosts, workflows.HostReady, kept+doomed)
	})
	t.Logf("%d hosts registered and ready in %s", len(hosts), time.Since(started).Round(100*time.Millisecond))

	dir := t.TempDir()
	script := filepath.Join(dir, "ok.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "spread.yaml")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf(`
name: spread
roles:
  - {name: worker, members: %d, maxInFlight: %d, startscript: %s, replaceAfter: 1s, placement: {maxPerHost: 1}}
`, members, members, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath, "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	onDoomed := func(st workflows.ClusterStatus) int {
		return len(slices.DeleteFunc(placements(st), func(p string) bool { return !strings.Contains(p, "@sim-0") }))
	}
	if n := onDoomed(s.status("spread")); n != doomed {
		t.Fatalf("%d members on the doomed hosts, want one on each of %d", n, doomed)
	}

	killed := time.Now()
	s.kill(lost)
	waitEvery(t, 60*time.Second, time.Second, "the doomed hosts lost", func() (bool, string) {
		return hostsIn(fleetHosts(t, s), workflows.HostLost, doomed)
	})
	t.Logf("lost %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	var st workflows.ClusterStatus
	// Two passes of replacement, of 8 writing children and more, took 12 s here idle and
	// 30 s beside three busy loops.
	waitEvery(t, 90*time.Second, time.Second, "their members replaced on the other hosts", func() (bool, string) {
		// A busy server may not answer in time: asked again.
		res := s.cli("status", "spread", "-o", "json")
		st = workflows.ClusterStatus{}
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &st) != nil {
			return false, fmt.Sprintf("no status: %s", strings.TrimSpace(res.Stderr))
		}
		return st.Phase == workflows.PhaseReady && st.Role("worker").Ready == members && onDoomed(st) == 0,
			fmt.Sprintf("%s (%s), %d members ready, %d on the doomed hosts", st.Phase, st.Message, st.Role("worker").Ready, onDoomed(st))
	})
	t.Logf("replaced %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A reconcile lists the cluster's members on every reachable host, in listing children
	// of up to 500 hosts: the cluster's own history lists none. Its files go to its 150
	// hosts through writing children too, a write to a handful of hosts (a notice) aside.
	if res := s.cli("reconcile", "spread"); res.Code != 0 || !strings.Contains(res.Stdout, fmt.Sprintf("The backend has %d member sandboxes", members)) {
		t.Errorf("reconcile: %s", res)
	}
	type count struct{ byCluster, byChildren, children int }
	counts := map[string]*count{"ListMemberOrdinals": {}, "WriteClusterFiles": {}}
	childFor := map[string]string{workflows.HostsListingWorkflowName: "ListMemberOrdinals", workflows.HostsWritingWorkflowName: "WriteClusterFiles"}
	// Attempts that timed out, such as those started on a host that never ran them.
	timedOut := 0
	if err := testenv.WalkHistories(ctx, c, workflows.ClusterWorkflowID("spread"), func(id string, _ int, h *historypb.History) error {
		for _, e := range h.Events {
			if e.GetActivityTaskTimedOutEventAttributes() != nil || e.GetActivityTaskStartedEventAttributes().GetLastFailure().GetTimeoutFailureInfo() != nil {
				timedOut++
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && counts[a.GetActivityType().GetName()] != nil {
				if n := counts[a.GetActivityType().GetName()]; id == workflows.ClusterWorkflowID("spread") {
					n.byCluster++
				} else {
					n.byChildren++
				}
			}
			if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil && childFor[a.GetWorkflowType().GetName()] != "" {
				counts[childFor[a.GetWorkflowType().GetName()]].children++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	listings, writes := counts["ListMemberOrdinals"], counts["WriteClusterFiles"]
	if want := (kept + workflows.HostsPerChild - 1) / workflows.HostsPerChild; listings.byCluster != 0 || listings.children < want || listings.byChildren < kept {
		t.Errorf("the cluster listed %d hosts itself, and %d listing children listed %d; want none, at least %d children, and every one of the %d hosts",
			listings.byCluster, listings.children, listings.byChildren, want, kept)
	}
	if writes.byCluster >= members || writes.children < 2 || writes.byChildren < 2*members {
		t.Errorf("the cluster wrote its files to %d hosts itself, and %d writing children to %d; want fewer than its %d hosts, at least 2 children, and every host twice",
			writes.byCluster, writes.children, writes.byChildren, members)
	}
	t.Logf("the cluster wrote to %d hosts itself, and %d writing children to %d; %d attempts of activities timed out",
		writes.byCluster, writes.children, writes.byChildren, timedOut)

	// No workflow of the registry holds more than its shard's leases, nor a long history.
	resp, err := c.QueryWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.RegistryQuery)
	if err != nil {
		t.Fatal(err)
	}
	var info workflows.RegistryInfo
	if err := resp.Get(&info); err != nil {
		t.Fatal(err)
	}
	if len(info.Shards) != workflows.HostShards {
		t.Errorf("%d shards run for %d hosts, want all %d", len(info.Shards), kept+doomed, workflows.HostShards)
	}
	mostPending, mostEvents := 0, int64(0)
	for _, id := range append([]string{workflows.HostsWorkflowID}, shardIDs(info.Shards)...) {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		mostPending = max(mostPending, len(d.GetPendingActivities()))
		mostEvents = max(mostEvents, d.GetWorkflowExecutionInfo().GetHistoryLength())
	}
	t.Logf("the registry's workflows: at most %d pending activities, %d events a run", mostPending, mostEvents)
	if mostPending > 100 || mostEvents > 10240 {
		t.Errorf("a workflow of the registry holds %d pending activities and %d events; a shard of %d hosts should hold a lease each and a short history",
			mostPending, mostEvents, (kept+doomed)/workflows.HostShards)
	}
}

// A host that takes a task and never runs it (an overloaded server's answer to its poll
// lost on the way) holds a cluster-wide write for the host activities' heartbeat timeout,
// 15 s, not for the host's wait, its timeout: 5 minutes here, which before held the deploy
// as long. Three simulated hosts each leave their first write of the cluster's files
// unanswered; a fourth, busy, takes 18 s over each of its writes, past that timeout, and
// heartbeats meanwhile, so none of its writes may be retried.
func TestAWriteNeverRunIsRetriedAfterItsHeartbeatTimeoutAndASlowOneIsNot(t *testing.T) {
	t.Parallel()
	guard(t)
	const mute, slowWrites = 3, 18 * time.Second
	s := newServerStack(t)
	s.startWorker()
	for _, p := range []*testenv.Process{
		simulate(t, s, "sim-mute", "mute-", mute, 5*time.Minute, "--unanswered-writes", "1"),
		simulate(t, s, "sim-slow", "slow-", 1, 5*time.Minute, "--slow-writes", slowWrites.String()),
	} {
		if err := p.WaitFor("Simulating hosts", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	waitEvery(t, time.Minute, time.Second, "the hosts ready", func() (bool, string) {
		return hostsIn(fleetHosts(t, s), workflows.HostReady, mute+1)
	})
	specPath, _ := writeCluster(t, fmt.Sprintf(`
name: mute
roles:
  - {name: worker, members: %d, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}}
`, mute+1))
	if res := s.cli("deploy", "-f", specPath, "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}

	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	retried := map[enumspb.TimeoutType]int{}
	var slowest time.Duration // of the writes the busy host completed
	if err := testenv.WalkHistories(ctx, c, workflows.ClusterWorkflowID("mute"), func(_ string, _ int, h *historypb.History) error {
		writeOn := map[int64]string{} // a write's scheduled event: the queue it went to
		startedAt := map[int64]time.Time{}
		for _, e := range h.Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "WriteClusterFiles" {
				writeOn[e.GetEventId()] = a.GetTaskQueue().GetName()
			}
			// A retried attempt leaves no event of its own: the attempt after it says why.
			if a := e.GetActivityTaskStartedEventAttributes(); a != nil && writeOn[a.GetScheduledEventId()] != "" {
				startedAt[e.GetEventId()] = e.GetEventTime().AsTime()
				if a.GetAttempt() > 1 {
					retried[a.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType()]++
				}
			}
			if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && strings.HasSuffix(writeOn[a.GetScheduledEventId()], "@slow-00000") {
				slowest = max(slowest, e.GetEventTime().AsTime().Sub(startedAt[a.GetStartedEventId()]))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if retried[enumspb.TIMEOUT_TYPE_HEARTBEAT] != mute || len(retried) != 1 {
		t.Errorf("the writes retried, by why: %v; want each unanswering host's first, after its heartbeat timeout, and no other", retried)
	}
	if slowest < slowWrites {
		t.Errorf("the busy host's slowest write took %s, want at least its %s", slowest, slowWrites)
	}
}

// simulate starts `clusterflow simulate` with hosts named prefix-N on the stack, each
// timing out after timeout, in a process named name, with more of simulate's flags; it is
// stopped at the end.
func simulate(t *testing.T, s *stack, name, prefix string, hosts int, timeout time.Duration, flags ...string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartHost("", s.dir, s.dir, name, s.env, append([]string{"simulate", "--hosts", fmt.Sprint(hosts), "--prefix", prefix,
		"--host-timeout", timeout.String(), "--data", filepath.Join(s.dir, name)}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	testenv.StopAllAtEnd(t, filepath.Join(s.dir, name))
	return p
}

// fleetTestLimit is the fleet test's guard: the suite's, or twice it in `make fleet`
// (testlimit.BenchEnv), where it has the machine: alone it took 80 to 140 s here, too
// near three minutes for a busy CI machine.
func fleetTestLimit() time.Duration {
	if testlimit.Benching() {
		return 2 * testlimit.TestLimit
	}
	return testlimit.TestLimit
}

// waitEvery polls cond every interval for up to limit; cond says whether it holds, and what
// it saw, for the failure if it never does.
func waitEvery(t *testing.T, limit, interval time.Duration, what string, cond func() (holds bool, seen string)) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(interval) {
		holds, seen := cond()
		if holds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", limit, what, seen)
		}
	}
}

// hostsIn says whether want hosts are in state, and how many are in each.
func hostsIn(hosts []workflows.HostDocument, state workflows.HostState, want int) (bool, string) {
	counts := map[workflows.HostState]int{}
	for _, h := range hosts {
		counts[h.State]++
	}
	return counts[state] == want, fmt.Sprintf("hosts by state %v", counts)
}

// fleetHosts lists the stack's hosts, as `clusterflow hosts -o json` prints them; none
// while the server is too busy to answer in time (thousands of hosts registering).
func fleetHosts(t *testing.T, s *stack) []workflows.HostDocument {
	t.Helper()
	res := s.cli("hosts", "-o", "json")
	if res.Code != 0 {
		t.Logf("hosts: %s", strings.TrimSpace(res.Stderr))
		return nil
	}
	var hosts []workflows.HostDocument
	if err := json.Unmarshal([]byte(res.Stdout), &hosts); err != nil {
		t.Fatalf("hosts -o json: %v", err)
	}
	return hosts
}

func shardIDs(shards []int) []string {
	ids := make([]string, len(shards))
	for i, shard := range shards {
		ids[i] = workflows.HostShardWorkflowID(shard)
	}
	return ids
}
