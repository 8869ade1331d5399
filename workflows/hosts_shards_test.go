package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
)

// registryEnv runs the registry's workflows with leases that hold until cancelled.
func registryEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetActivityTimeoutGracePeriod(activityWallClockGrace)
	env.RegisterWorkflowWithOptions(hosts.Workflow, workflow.RegisterOptions{Name: workflows.HostsWorkflowName})
	env.RegisterWorkflowWithOptions(hosts.ShardWorkflow, workflow.RegisterOptions{Name: workflows.HostShardWorkflowName})
	// No host answers here: a check-in fails (this worker serves no host), and a lease
	// is never taken.
	env.RegisterActivity(&activities.Activities{})
	env.SetTestTimeout(time.Minute)
	return env
}

// A registry from before shards, which kept every host itself, moves its hosts into
// shards when a worker with shards asks: it continues as new, carrying them all, and the
// next run, a directory, starts each shard holding hosts with those hosts, their marks and
// each cluster's members there, and lists those shards.
func TestARegistryFromBeforeShardsMovesItsHostsIntoShards(t *testing.T) {
	names := []string{"h1", "h2", "h3", "h4", "h5", "h6"}
	fleet := readyHosts(names...)
	fleet[2].Cordoned = true
	before := workflows.HostsInput{
		Hosts:    fleet,
		Clusters: []workflows.ClusterPlacement{{Cluster: "c", Members: map[string]int{"h1": 2, "h3": 1}}},
	}

	env := registryEnv(t)
	env.OnGetVersion(change.ShardedRegistry, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.ClusterWorkflowID("c"), "", workflows.HostsChangedSignal, mock.Anything).Return(nil)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ShardRegistrySignal, nil) }, time.Second)
	env.ExecuteWorkflow(workflows.HostsWorkflowName, before)
	var next *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &next) || next.WorkflowType.Name != workflows.HostsWorkflowName {
		t.Fatalf("the registry did not continue as new when asked to move into shards: %v", env.GetWorkflowError())
	}
	var carried workflows.HostsInput
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &carried); err != nil {
		t.Fatal(err)
	}
	if len(carried.Hosts) != len(names) || !carried.Hosts[2].Cordoned || len(carried.Clusters) != 1 {
		t.Fatalf("the registry carried %+v, want its 6 hosts (h3 cordoned) and its cluster", carried)
	}

	env = registryEnv(t)
	var mu sync.Mutex
	started := map[int]workflows.HostsInput{}
	env.OnWorkflow(workflows.HostShardWorkflowName, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.HostsInput) error {
		mu.Lock()
		defer mu.Unlock()
		started[in.Shard] = in
		return nil
	})
	var info workflows.RegistryInfo
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.RegistryQuery)
		if err == nil {
			err = v.Get(&info)
		}
		if err != nil {
			t.Error(err)
		}
		env.CancelWorkflow()
	}, time.Minute)
	env.ExecuteWorkflow(workflows.HostsWorkflowName, carried)

	want := map[int][]string{}
	for _, n := range names {
		want[workflows.HostShard(n)] = append(want[workflows.HostShard(n)], n)
	}
	if !info.Sharded || !slices.Equal(info.Shards, slices.Sorted(maps.Keys(want))) {
		t.Errorf("the directory lists %+v, want shards %v", info, slices.Sorted(maps.Keys(want)))
	}
	for shard, hostNames := range want {
		in, ok := started[shard]
		if !ok {
			t.Errorf("shard %d, for %v, was not started", shard, hostNames)
			continue
		}
		var got []string
		for _, h := range in.Hosts {
			got = append(got, h.Name)
			if h.Cordoned != (h.Name == "h3") {
				t.Errorf("shard %d got %s cordoned=%v", shard, h.Name, h.Cordoned)
			}
		}
		if !slices.Equal(got, hostNames) {
			t.Errorf("shard %d got hosts %v, want %v", shard, got, hostNames)
		}
		if len(in.Clusters) != 1 || in.Clusters[0].Cluster != "c" {
			t.Errorf("shard %d was not told of cluster c: %+v", shard, in.Clusters)
			continue
		}
		for host, n := range in.Clusters[0].Members {
			if workflows.HostShard(host) != shard || before.Clusters[0].Members[host] != n {
				t.Errorf("shard %d got c's members %v", shard, in.Clusters[0].Members)
			}
		}
	}
}

// The directory forwards a cluster's placement split by shard: a new cluster to every
// shard (each owes it its hosts), later ones only to the shards holding its members now
// or before, and a deleted cluster to every shard.
func TestTheDirectoryForwardsEachShardItsPartOfAPlacement(t *testing.T) {
	env := registryEnv(t)
	var mu sync.Mutex
	got := map[string][]map[string]int{}
	for shard := range workflows.HostShards {
		env.OnSignalExternalWorkflow(mock.Anything, workflows.HostShardWorkflowID(shard), "", mock.Anything, mock.Anything).Return(
			func(_, _, _, name string, arg any) error {
				mu.Lock()
				defer mu.Unlock()
				if p, ok := arg.(workflows.ClusterPlacement); ok && name == workflows.ClusterHostsSignal {
					if p.Gone {
						got[workflows.HostShardWorkflowID(shard)] = append(got[workflows.HostShardWorkflowID(shard)], nil)
					} else {
						got[workflows.HostShardWorkflowID(shard)] = append(got[workflows.HostShardWorkflowID(shard)], p.Members)
					}
				}
				return nil
			})
	}
	// Four hosts in four shards (found by name), and every shard running.
	var four []string
	seen := map[int]bool{}
	for i := 0; len(four) < 4; i++ {
		name := fmt.Sprintf("host-%d", i)
		if shard := workflows.HostShard(name); !seen[shard] {
			seen[shard] = true
			four = append(four, name)
		}
	}
	shard := func(host string) string { return workflows.HostShardWorkflowID(workflows.HostShard(host)) }
	// Each step signals a placement, then waits until the shards it must reach have their
	// part, and checks it. The signals' mocks run on goroutines of their own, and the test's
	// clock runs in real time while they do: on a busy machine 128 of them took longer than
	// a fixed second of it, and a check at a fixed time saw part of them.
	type step struct {
		placement workflows.ClusterPlacement
		reached   int // shards that must have their part before the check
		check     func()
	}
	var steps []step
	var run func(i int)
	run = func(i int) {
		if i == len(steps) {
			env.CancelWorkflow()
			return
		}
		env.SignalWorkflow(workflows.ClusterHostsSignal, steps[i].placement)
		deadline := time.Now().Add(time.Minute)
		var wait func()
		wait = func() {
			mu.Lock()
			reached := len(got)
			mu.Unlock()
			if reached < steps[i].reached && time.Now().Before(deadline) {
				env.RegisterDelayedCallback(wait, 100*time.Millisecond)
				return
			}
			mu.Lock()
			steps[i].check()
			clear(got)
			mu.Unlock()
			env.RegisterDelayedCallback(func() { run(i + 1) }, time.Second)
		}
		env.RegisterDelayedCallback(wait, 100*time.Millisecond)
	}
	steps = []step{{
		placement: workflows.ClusterPlacement{Cluster: "c", Members: map[string]int{four[0]: 1, four[1]: 2}},
		reached:   workflows.HostShards,
		check: func() {
			if len(got) != workflows.HostShards {
				t.Errorf("a new cluster's placement reached %d shards, want every one", len(got))
			}
			if part := got[shard(four[0])]; len(part) != 1 || !maps.Equal(part[0], map[string]int{four[0]: 1}) {
				t.Errorf("%s's shard got %v", four[0], part)
			}
		},
	}, {
		placement: workflows.ClusterPlacement{Cluster: "c", Members: map[string]int{four[1]: 2, four[2]: 1}},
		reached:   3,
		check: func() {
			want := map[string][]map[string]int{
				shard(four[0]): {{}}, // held members before: told it holds none now
				shard(four[1]): {{four[1]: 2}},
				shard(four[2]): {{four[2]: 1}},
			}
			if !maps.EqualFunc(got, want, func(a, b []map[string]int) bool { return slices.EqualFunc(a, b, maps.Equal) }) {
				t.Errorf("a known cluster's placement was forwarded as %v, want %v", got, want)
			}
		},
	}, {
		placement: workflows.ClusterPlacement{Cluster: "c", Gone: true},
		reached:   workflows.HostShards,
		check: func() {
			if len(got) != workflows.HostShards {
				t.Errorf("a deleted cluster was forwarded to %d shards, want every one", len(got))
			}
		},
	}}
	env.RegisterDelayedCallback(func() { run(0) }, time.Second)
	// Started afresh, as a registration starts it, it finds every shard running (the mocks
	// take its setup signal). This test once gave it its shards as well, which only a
	// continue-as-new does (and then it finds none): it listed each shard twice, and the
	// check at a fixed time saw the second round arrive late on a busy machine.
	env.ExecuteWorkflow(workflows.HostsWorkflowName, workflows.HostsInput{})
}

// A cluster keeps one view of the fleet, to which each shard's hosts come on their own:
// a shard's view replaces that shard's hosts (one forgotten is gone from it), and leaves
// the other shards' as they were.
func TestEachShardsHostsReplaceOnlyThatShardsInAClustersView(t *testing.T) {
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("h%02d", i))
	}
	view := readyHosts(names...)
	shard := workflows.HostShard("h07")
	var kept []workflows.Host
	for _, h := range view {
		if workflows.HostShard(h.Name) == shard && h.Name != "h07" {
			h.Lost = true
			kept = append(kept, h)
		}
	}
	merged := hosts.MergeShard(view, workflows.HostShardView{Shard: shard, Hosts: kept})
	if !slices.IsSortedFunc(merged, func(a, b workflows.Host) int { return compareNames(a.Name, b.Name) }) {
		t.Error("the merged view is not sorted by name")
	}
	for _, h := range view {
		m := slices.IndexFunc(merged, func(m workflows.Host) bool { return m.Name == h.Name })
		switch {
		case h.Name == "h07":
			if m >= 0 {
				t.Error("h07, no longer in its shard, is still in the view")
			}
		case workflows.HostShard(h.Name) == shard:
			if m < 0 || !merged[m].Lost {
				t.Errorf("%s, lost in its shard's view, is not lost in the cluster's", h.Name)
			}
		case m < 0 || merged[m].Lost:
			t.Errorf("%s, of another shard, changed", h.Name)
		}
	}
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A host's lease heartbeats every quarter of its timeout, and its heartbeat timeout is the
// timeout and that beat: the host reads its beat from there. A run from before the change
// keeps leases of a beat a tenth of the timeout, and a host still beats them every tenth.
func TestALeaseBeatsEveryQuarterOfItsHostTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version workflow.Version
		want    time.Duration
	}{
		{"now", 1, 12500 * time.Millisecond},
		{"before sparse beats", workflow.DefaultVersion, 11 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := registryEnv(t)
			env.RegisterActivity(&activities.Activities{Host: &workflows.HostRegistration{Name: "h1", Timeout: 10 * time.Second}})
			env.OnGetVersion(change.SparseLeaseBeats, workflow.DefaultVersion, 1).Return(tc.version)
			var got []time.Duration
			env.OnActivity("HoldHostLease", mock.Anything, mock.Anything).Return(func(ctx context.Context, timeout time.Duration) error {
				info := activity.GetInfo(ctx)
				got = append(got, info.HeartbeatTimeout)
				if beat := workflows.LeaseBeatOf(timeout, info.HeartbeatTimeout); beat != tc.want-timeout {
					t.Errorf("the host beats every %s, want %s", beat, tc.want-timeout)
				}
				env.CancelWorkflow()
				return nil
			})
			env.ExecuteWorkflow(workflows.HostShardWorkflowName, workflows.HostsInput{Shard: 1, Hosts: readyHosts("h1")})
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("the leases' heartbeat timeouts were %v, want one of %s (a host timeout of 10s)", got, tc.want)
			}
		})
	}
}

// A worker says its version and its agent's when it registers its host: the registry keeps
// them in every host's entry, so a version past its bound is refused by name, before
// anything is kept.
func TestARegistrationOfAnOverlongVersionIsRefused(t *testing.T) {
	env := registryEnv(t)
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(nil) // the shard tells the directory
	reg := workflows.HostRegistration{Name: "h1", Timeout: 10 * time.Second, Version: strings.Repeat("v", 101)}
	long := updateAt(env, time.Second, workflows.RegisterHostUpdate, reg)
	reg.Version, reg.AgentVersion = "0.1.0 (commit 1a2b3c4d5e6f-dirty)", strings.Repeat("a", 101)
	longAgent := updateAt(env, 2*time.Second, workflows.RegisterHostUpdate, reg)
	reg.AgentVersion = "0.1.0 (commit 0f0f0f0f0f0f)"
	fine := updateAt(env, 3*time.Second, workflows.RegisterHostUpdate, reg)
	env.RegisterDelayedCallback(env.CancelWorkflow, 4*time.Second)
	env.ExecuteWorkflow(workflows.HostShardWorkflowName, workflows.HostsInput{Shard: workflows.HostShard("h1")})
	if long.refused == nil || !strings.Contains(long.refused.Error(), "host h1 version: is 101 bytes; it may be at most 100") {
		t.Errorf("an overlong version was not refused by name: %v", long.refused)
	}
	if longAgent.refused == nil || !strings.Contains(longAgent.refused.Error(), "host h1 agentVersion: is 101 bytes; it may be at most 100") {
		t.Errorf("an overlong agent version was not refused by name: %v", longAgent.refused)
	}
	if fine.refused != nil {
		t.Fatalf("a version of 34 bytes was refused: %v", fine.refused)
	}
	if h, ok := fine.result.(workflows.Host); !ok || h.Version != reg.Version || h.AgentVersion != reg.AgentVersion {
		t.Errorf("the registry kept %+v, want version %q and agent version %q", fine.result, reg.Version, reg.AgentVersion)
	}
}
