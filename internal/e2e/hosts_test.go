package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/ports"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/internal/version"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// hostTimeout is the fleet's --host-timeout: short, so that a lost host is noticed soon.
const hostTimeout = 3 * time.Second

// fleet is a stack whose members live on hosts: one `clusterflow worker --host` per host,
// each with its own data folder (and so its own agent), and each in its own network
// namespace with an address of its own, reaching the server over a test network.
type fleet struct {
	*stack
	net   *testenv.Network
	hosts map[string]*fleetHost
	// timeout is the hosts' --host-timeout.
	timeout time.Duration
	// version is what `clusterflow version` says, once asked.
	version string
}

type fleetHost struct {
	name, labels, data string
	// bootID is the file the host reads as its boot ID (CLUSTERFLOW_BOOT_ID_FILE).
	bootID string
	net    *testenv.Host
	worker *testenv.Process
	runs   int
	// args are more worker flags, such as allow-lists.
	args []string
}

// newFleet starts a server and one worker per host; hosts are "name" or "name:k=v,k=v".
func newFleet(t *testing.T, hosts ...string) *fleet {
	return newFleetWith(t, hostTimeout, hosts...)
}

// newFleetWith is newFleet with hosts of the given --host-timeout.
func newFleetWith(t *testing.T, timeout time.Duration, hosts ...string) *fleet {
	return newFleetPrepared(t, timeout, nil, hosts...)
}

// newFleetPrepared is newFleetWith, with each host prepared (its network namespace made)
// before its worker starts.
func newFleetPrepared(t *testing.T, timeout time.Duration, prepare func(*fleetHost), hosts ...string) *fleet {
	network := testenv.NewNetwork(t)
	port, err := ports.Reserve(network.Address)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{stack: newServerStackAt(t, net.JoinHostPort(network.Address, strconv.Itoa(port))), net: network, hosts: map[string]*fleetHost{}, timeout: timeout}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the hosts' logs:\n%s", tailOfFiles(filepath.Join(f.dir, "host-*.stderr"), filepath.Join(f.dir, "hosts", "*", "agent", "agent.log")))
		}
	})
	for i, h := range hosts {
		name, labels, _ := strings.Cut(h, ":")
		fh := &fleetHost{name: name, labels: labels, data: filepath.Join(f.dir, "hosts", name), net: network.AddHost(i + 1),
			bootID: filepath.Join(f.dir, "boot-id-"+name)}
		if err := os.WriteFile(fh.bootID, []byte("boot-1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		testenv.StopAllAtEnd(t, fh.data)
		f.hosts[name] = fh
		if prepare != nil {
			prepare(fh)
		}
		f.startHost(name)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range f.hosts {
			if !yield(n) {
				return
			}
		}
	})
	f.waitForHosts("every host ready", func(hs []workflows.HostDocument) bool {
		return slices.Equal(hostStates(hs), withState(names, workflows.HostReady))
	})
	return f
}

func (f *fleet) startHost(name string) {
	f.t.Helper()
	h := f.hosts[name]
	h.runs++
	args := []string{"worker", "--data", h.data, "--host", name, "--host-address", h.net.Address, "--host-timeout", f.timeout.String()}
	if h.labels != "" {
		args = append(args, "--labels", h.labels)
	}
	args = append(args, h.args...)
	// Hosts run the light binary, without the embedded server and Web UI.
	env := append(slices.Clone(f.env), "CLUSTERFLOW_BOOT_ID_FILE="+h.bootID)
	h.worker = f.startWith(testenv.StartHost, h.net.Namespace, env, "host-"+name, h.runs, "Worker starting", args...)
}

// killHost kills the host's worker, agent and scripts, as a machine dying would.
func (f *fleet) killHost(name string) {
	f.t.Helper()
	f.kill(f.hosts[name].worker)
	testenv.StopAll(f.hosts[name].data)
}

func (f *fleet) hostList() []workflows.HostDocument {
	f.t.Helper()
	res := f.cli("hosts", "-o", "json")
	if res.Code != 0 {
		f.t.Fatalf("hosts: %s", res)
	}
	var hosts []workflows.HostDocument
	if err := json.Unmarshal([]byte(res.Stdout), &hosts); err != nil {
		f.t.Fatalf("hosts -o json: %v\n%s", err, res.Stdout)
	}
	want := f.binaryVersion()
	for _, h := range hosts {
		if _, err := time.ParseDuration(h.Timeout); h.State == "" || err != nil {
			f.t.Fatalf("hosts -o json: host %s has no state or no readable timeout:\n%s", h.Name, res.Stdout)
		}
		if h.Version != want || h.AgentVersion != want {
			f.t.Fatalf("hosts -o json: host %s says its worker is version %q and its agent %q, and the binary they run %q:\n%s", h.Name, h.Version, h.AgentVersion, want, res.Stdout)
		}
	}
	return hosts
}

// binaryVersion is the version the test's binaries give through `clusterflow version`, which
// every host's worker reports to the registry: the release this code is, and its commit
// when the build knew it.
func (f *fleet) binaryVersion() string {
	f.t.Helper()
	if f.version != "" {
		return f.version
	}
	res := f.cli("version", "-o", "json")
	var v version.Info
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &v) != nil {
		f.t.Fatalf("version -o json: %s", res)
	}
	if v.Release != version.Release || v.Go != runtime.Version() {
		f.t.Fatalf("version -o json says release %q built by %s; this code is %q, built by %s", v.Release, v.Go, version.Release, runtime.Version())
	}
	f.version = v.String()
	return f.version
}

func (f *fleet) waitForHosts(what string, cond func([]workflows.HostDocument) bool) []workflows.HostDocument {
	f.t.Helper()
	var hosts []workflows.HostDocument
	waitFor(f.t, what, func() bool {
		hosts = f.hostList()
		return cond(hosts)
	})
	return hosts
}

// sandboxHost says which host's data folder holds the member's sandbox, and checks the
// member's script was told that host; "" when no host has it.
func (f *fleet) sandboxHost(cluster, member string) string {
	f.t.Helper()
	var found []string
	for name, h := range f.hosts {
		told, err := os.ReadFile(filepath.Join(clusterDir(h.data, cluster), member, "host"))
		if err != nil {
			continue
		}
		if strings.TrimSpace(string(told)) != name {
			f.t.Errorf("%s runs on %s but its script was told CLUSTERFLOW_HOST=%s", member, name, told)
		}
		found = append(found, name)
	}
	if len(found) > 1 {
		f.t.Errorf("%s has sandboxes on several hosts: %v", member, found)
	}
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// deploy deploys cluster name from specPath, waits until it is ready, and checks where its
// members went ("member@host=state", as placements writes them).
func (f *fleet) deploy(specPath, name string, want ...string) {
	f.t.Helper()
	if res := f.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		f.t.Fatalf("deploy %s: %s", name, res)
	}
	if got := placements(f.status(name)); !slices.Equal(got, want) {
		f.t.Fatalf("%s placed %v, want %v", name, got, want)
	}
}

func hostStates(hosts []workflows.HostDocument) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.Name+"="+string(h.State))
	}
	return out
}

func withState(names []string, state workflows.HostState) []string {
	var out []string
	for _, n := range names {
		out = append(out, n+"="+string(state))
	}
	return out
}

// placements lists "member@host=state" for every member of the cluster.
func placements(s workflows.ClusterStatus) []string {
	var out []string
	for _, r := range s.Roles {
		for _, m := range r.Members {
			out = append(out, fmt.Sprintf("%s@%s=%s", m.Name, m.Host, m.State))
		}
	}
	return out
}

const spreadSpec = `
name: spread
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {hosts: {zone: b}}}
  - name: worker
    members: 2
    dependsOn: [controller]
    startscript: trace.sh
    env: {TRACE: TRACE_FILE, DEPS: controller}
    replaceAfter: 4s
    placement: {maxPerHost: 1}
`

func TestMembersArePlacedOnHostsAndReplacedWhenTheirHostIsLost(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1:zone=a", "h2:zone=a", "h3:zone=b")

	// A deploy the hosts cannot hold is refused, naming the constraint, and nothing starts.
	tooWide := writeSpec(t, filepath.Join(t.TempDir(), "x.yaml"), "x.yaml", "name: toowide\nroles: [{name: w, members: 4, startscript: s.sh, placement: {maxPerHost: 1}}]\n")
	os.WriteFile(filepath.Join(filepath.Dir(tooWide), "s.sh"), []byte("#!/bin/sh\n"), 0o755)
	res := f.cli("deploy", "-f", tooWide)
	if res.Code != 2 || !strings.Contains(res.Stderr, "deploy refused: roles[0].placement: 4 members with maxPerHost 1 need 4 hosts; 3 are ready (h1, h2, h3)") {
		t.Errorf("an impossible deploy was not refused with its reason: %s", res)
	}
	if res := f.cli("status", "toowide"); res.Code == 0 {
		t.Errorf("the refused deploy started a cluster: %s", res)
	}

	specPath, trace := writeCluster(t, spreadSpec)
	want := []string{"spread-controller-0@h3=ready", "spread-worker-0@h1=ready", "spread-worker-1@h2=ready"}
	f.deploy(specPath, "spread", want...)
	for _, p := range want {
		member, host, _ := strings.Cut(strings.TrimSuffix(p, "=ready"), "@")
		if got := f.sandboxHost("spread", member); got != host {
			t.Errorf("%s's sandbox is on %q, want %s", member, got, host)
		}
	}
	if table := f.cli("status", "spread"); !strings.Contains(table.Stdout, "HOST") || !strings.Contains(table.Stdout, "h3") {
		t.Errorf("status does not show hosts:\n%s", table.Stdout)
	}
	if table := f.cli("hosts"); !strings.Contains(table.Stdout, "zone=b") || !strings.Contains(table.Stdout, "h3    ready") {
		t.Errorf("hosts table:\n%s", table.Stdout)
	}

	// A resize the hosts cannot hold is refused with the reason, and changes nothing.
	res = f.cli("resize", "spread", "worker=4")
	if res.Code != 2 || !strings.Contains(res.Stderr, "resize refused: roles[1].placement: 4 members with maxPerHost 1 need 4 hosts; 3 are ready (h1, h2, h3)") {
		t.Errorf("an impossible resize was not refused with its reason: %s", res)
	}
	if s := f.status("spread"); s.Generation != 1 {
		t.Errorf("the refused resize moved the generation to %d", s.Generation)
	}

	// Losing h2: its member goes down with the reason, within the host timeout, and is
	// replaced on the one host with room (h3) once replaceAfter passes.
	f.killHost("h2")
	killed := time.Now()
	f.waitForHosts("h2 lost", func(hs []workflows.HostDocument) bool {
		return slices.Contains(hostStates(hs), "h2=lost")
	})
	var down workflows.MemberStatus
	waitFor(t, "spread-worker-1 down", func() bool {
		s := f.status("spread")
		down = *s.Role("worker").Member("spread-worker-1")
		return down.State == workflows.MemberDown
	})
	t.Logf("h2 was taken for lost, and its member down, %s after it was killed", time.Since(killed).Round(100*time.Millisecond))
	if h := down.Health; h == nil || len(h.Transitions) == 0 || !strings.Contains(h.Transitions[len(h.Transitions)-1].Reason, "host h2 lost") {
		t.Errorf("the down member does not say its host was lost: %+v", down.Health)
	}
	var s workflows.ClusterStatus
	waitFor(t, "a replacement on h3", func() bool {
		s = f.status("spread")
		return slices.Equal(placements(s), []string{"spread-controller-0@h3=ready", "spread-worker-0@h1=ready", "spread-worker-2@h3=ready"}) && s.Phase == workflows.PhaseReady
	})
	if got := f.sandboxHost("spread", "spread-worker-2"); got != "h3" {
		t.Errorf("the replacement's sandbox is on %q, want h3", got)
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "", "spread-controller-0", "spread-worker-0", "spread-worker-1", "spread-worker-2")
	// The survivors learn of the replacement once, and of the lost member once.
	expectRuns(t, runs, "addnodes", "--addnodes --role worker --nodes spread-worker-2", "spread-controller-0", "spread-worker-0")
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes spread-worker-1", "spread-controller-0", "spread-worker-0")

	// Cordoned, h3 takes nothing new; forgetting h2 takes it off the list.
	if res := f.cli("host", "cordon", "h3"); res.Code != 0 || !strings.Contains(res.Stdout, "host h3: cordoned") {
		t.Errorf("cordon: %s", res)
	}
	f.waitForHosts("the cluster told of the cordon", func([]workflows.HostDocument) bool { return true })
	res = f.cli("resize", "spread", "worker=3")
	if res.Code != 2 || !strings.Contains(res.Stderr, "need 3 hosts; 1 is ready (h1)") {
		t.Errorf("a resize onto a cordoned host was not refused: %s", res)
	}
	if res := f.cli("host", "forget", "h2"); res.Code != 0 {
		t.Errorf("forget: %s", res)
	}
	f.waitForHosts("h2 forgotten", func(hs []workflows.HostDocument) bool {
		return slices.Equal(hostStates(hs), []string{"h1=ready", "h3=cordoned"})
	})
	if res := f.cli("host", "forget", "h1"); res.Code == 0 || !strings.Contains(res.Stderr, "holds 1 members; drain it first") {
		t.Errorf("forgetting a host that holds members was not refused: %s", res)
	}
	if res := f.cli("delete", "spread", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	for name, h := range f.hosts {
		if name == "h2" {
			continue // lost: its sandbox stays until it comes back
		}
		if entries, _ := os.ReadDir(clusterDir(h.data, "spread")); len(entries) > 0 {
			t.Errorf("host %s still has files of the deleted cluster: %v", name, entries)
		}
	}
}

func TestAPartitionShorterThanReplaceAfterKeepsTheHostsMembers(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2")
	specPath, trace := writeCluster(t, `
name: back
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, replaceAfter: 5m, placement: {maxPerHost: 1}}
`)
	f.deploy(specPath, "back", "back-worker-0@h1=ready", "back-worker-1@h2=ready")
	// h2's link is cut: worker, agent and services carry on, unheard of.
	f.hosts["h2"].net.Cut()
	waitFor(t, "back-worker-1 down", func() bool {
		s := f.status("back")
		return s.Role("worker").Member("back-worker-1").State == workflows.MemberDown
	})
	f.hosts["h2"].net.Restore()
	var s workflows.ClusterStatus
	waitFor(t, "back-worker-1 up again", func() bool {
		s = f.status("back")
		return s.Role("worker").Member("back-worker-1").State == workflows.MemberReady && s.Phase == workflows.PhaseReady
	})
	if got := placements(s); !slices.Equal(got, []string{"back-worker-0@h1=ready", "back-worker-1@h2=ready"}) {
		t.Errorf("after the host came back: %v", got)
	}
	expectRuns(t, readTrace(t, trace), "configure", "", "back-worker-0", "back-worker-1")
}

func TestAPartitionLongerThanReplaceAfterEndsWithTheStaleMemberesRemoved(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2", "h3")
	specPath, trace := writeCluster(t, `
name: stale
reconcileEvery: 2s
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, replaceAfter: 3s, placement: {maxPerHost: 1}}
`)
	f.deploy(specPath, "stale", "stale-worker-0@h1=ready", "stale-worker-1@h2=ready")
	// h2's link is cut past replaceAfter; its sandbox stays behind.
	f.hosts["h2"].net.Cut()
	waitFor(t, "a replacement on h3", func() bool {
		s := f.status("stale")
		return slices.Equal(placements(s), []string{"stale-worker-0@h1=ready", "stale-worker-2@h3=ready"}) && s.Phase == workflows.PhaseReady
	})
	if f.sandboxHost("stale", "stale-worker-1") != "h2" {
		t.Fatal("the lost host's sandbox should still be there while it is away")
	}
	f.hosts["h2"].net.Restore()
	waitFor(t, "the stale sandbox on h2 removed", func() bool { return f.sandboxHost("stale", "stale-worker-1") == "" })
	var s workflows.ClusterStatus
	waitFor(t, "the cluster ready with no duplicate member", func() bool {
		s = f.status("stale")
		return s.Phase == workflows.PhaseReady && slices.Equal(placements(s), []string{"stale-worker-0@h1=ready", "stale-worker-2@h3=ready"})
	})
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "", "stale-worker-0", "stale-worker-1", "stale-worker-2")
	// The stale member is torn down where it was, and nobody is told of it again.
	expectRuns(t, runs, "teardown", "", "stale-worker-1")
	expectRuns(t, runs, "delnodes", "--delnodes --role worker --nodes stale-worker-1", "stale-worker-0")
}

func TestDrainMovesAHostsMembersInDependencyOrderWhileAnotherClusterDeploys(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2", "h3")
	specPath, trace := writeCluster(t, `
name: drained
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 3, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, DEPS: controller}, maxUnavailable: "1"}
`)
	f.deploy(specPath, "drained", "drained-controller-0@h1=ready", "drained-worker-0@h1=ready", "drained-worker-1@h2=ready", "drained-worker-2@h3=ready")
	// Another cluster deploys while h1 drains; none of its members may land on h1.
	otherSpec, otherTrace := writeCluster(t, `
name: beside
roles:
  - {name: web, members: 4, startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "1"}}
`)
	if res := f.cli("deploy", "-f", otherSpec); res.Code != 0 {
		t.Fatalf("deploy beside: %s", res)
	}
	res := f.cli("host", "drain", "h1", "--wait", "--timeout", "90s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "host h1 drained") {
		t.Fatalf("drain: %s", res)
	}
	var s workflows.ClusterStatus
	waitFor(t, "the drained cluster ready", func() bool {
		s = f.status("drained")
		return s.Phase == workflows.PhaseReady
	})
	for _, p := range placements(s) {
		if strings.Contains(p, "@h1=") {
			t.Errorf("a member is still on the drained host: %v", placements(s))
		}
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "", "drained-controller-0", "drained-controller-1", "drained-worker-0", "drained-worker-1", "drained-worker-2", "drained-worker-3")
	// The controller moves before the worker that depends on it.
	controller := runsOf(runs, "drained-controller-1", "configure")
	worker := runsOf(runs, "drained-worker-3", "configure")
	if len(controller) != 1 || len(worker) != 1 || worker[0].Start < controller[0].End {
		t.Errorf("the worker's replacement did not wait for the controller's: %+v %+v", controller, worker)
	}
	expectRuns(t, runs, "teardown", "", "drained-controller-0", "drained-worker-0")
	if got, want := story(t, trace, "teardown"), []string{"drained-controller-0 teardown reason=drain joining= replaces=", "drained-worker-0 teardown reason=drain joining= replaces="}; !slices.Equal(got, want) {
		t.Errorf("the drained members' teardowns were told %q, want %q", got, want)
	}

	if res := f.cli("status", "beside", "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("beside: %s", res)
	}
	for _, p := range placements(f.status("beside")) {
		if strings.Contains(p, "@h1=") {
			t.Errorf("a member of the other cluster landed on the draining host: %s", p)
		}
	}
	// Its members placed on h1 before the drain began moved like any others: each member,
	// first or replacement, configured once.
	otherRuns := runsOf(readTrace(t, otherTrace), "", "configure")
	if names := memberNames(otherRuns); len(names) < 4 || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("the other cluster's configures: %v", names)
	}
	if hs := f.hostList(); !slices.Contains(hostStates(hs), "h1=draining") {
		t.Errorf("hosts after the drain: %v", hostStates(hs))
	}
}

func TestLogsShowAMembersOutputFromTheHostHoldingIt(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2")
	specPath, trace := writeCluster(t, `
name: logged
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold}, placement: {maxPerHost: 1}}
`)
	holdOn(t, trace+".hold")
	if res := f.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "both configures to start", func() bool { return len(readTrace(t, trace)) == 2 })
	// Followed from this machine while the configure runs on h2.
	follow, err := testenv.Start(t.TempDir(), t.TempDir(), "logs-f", f.env, "logs", "logged", "logged-worker-1", "-f")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(follow.Stop)
	if err := follow.WaitFor("running configure for logged-worker-1 of worker in logged", time.Minute); err != nil {
		t.Fatal(err)
	}
	release(t, trace+".hold")
	if code, err := follow.Wait(time.Minute); err != nil || code != 0 {
		t.Errorf("logs -f did not end with the configure: exit %d, %v\n%s", code, err, follow.Output())
	}
	if res := f.cli("status", "logged", "--wait"); res.Code != 0 {
		t.Fatalf("status: %s", res)
	}
	if s := f.status("logged"); s.Role("worker").Member("logged-worker-1").Host != "h2" {
		t.Fatalf("logged-worker-1 is not on h2: %v", placements(s))
	}
	res := f.cli("logs", "logged", "logged-worker-1", "--event", "configure", "--tail", "1")
	if res.Code != 0 || strings.TrimSpace(res.Stdout) != "running configure for logged-worker-1 of worker in logged" {
		t.Errorf("logs --tail 1: %s", res)
	}
	if res := f.cli("logs", "logged", "logged-worker-7"); res.Code != 2 || !strings.Contains(res.Stderr, `no member "logged-worker-7"`) {
		t.Errorf("logs of an unknown member: %s", res)
	}
	if res := f.cli("logs", "logged", "logged-worker-1", "--event", "teardown"); res.Code != 2 || !strings.Contains(res.Stderr, "has no teardown output on host h2") {
		t.Errorf("logs of an event never run: %s", res)
	}
}

func TestATerminatedClustersOrphansAreListedAndRemovedOnRequest(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2")
	specPath, _ := writeCluster(t, `
name: orphaned
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}}
`)
	if res := f.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	keptSpec, _ := writeCluster(t, "name: kept\nroles: [{name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}}]\n")
	if res := f.cli("deploy", "-f", keptSpec, "--wait"); res.Code != 0 {
		t.Fatalf("deploy kept: %s", res)
	}
	if res := f.cli("hosts", "--orphans"); res.Code != 0 || !strings.Contains(res.Stdout, "No orphans") {
		t.Fatalf("orphans before anything was terminated: %s", res)
	}
	c := f.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.TerminateWorkflow(ctx, workflows.ClusterWorkflowID("orphaned"), "", "terminated from the Web UI, say"); err != nil {
		t.Fatal(err)
	}
	orphans := func(args ...string) []starter.Orphan {
		res := f.cli(append([]string{"hosts", "--orphans", "-o", "json"}, args...)...)
		if res.Code != 0 {
			t.Fatalf("hosts --orphans: %s", res)
		}
		var found []starter.Orphan
		if err := json.Unmarshal([]byte(res.Stdout), &found); err != nil {
			t.Fatalf("%v\n%s", err, res.Stdout)
		}
		return found
	}
	describe := func(found []starter.Orphan) []string {
		var out []string
		for _, o := range found {
			out = append(out, fmt.Sprintf("%s/%s %s %v removed=%v", o.Host, o.Cluster, o.Workflow, o.Members, o.Removed))
		}
		return out
	}
	want := []string{"h1/orphaned terminated [orphaned-worker-0] removed=false", "h2/orphaned terminated [orphaned-worker-1] removed=false"}
	if got := describe(orphans()); !slices.Equal(got, want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	for _, h := range []string{"h1", "h2"} {
		if !exists(clusterDir(f.hosts[h].data, "orphaned")) {
			t.Errorf("listing removed %s's files", h)
		}
	}
	want = []string{"h1/orphaned terminated [orphaned-worker-0] removed=true", "h2/orphaned terminated [orphaned-worker-1] removed=true"}
	if got := describe(orphans("--remove")); !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, h := range []string{"h1", "h2"} {
		if exists(clusterDir(f.hosts[h].data, "orphaned")) {
			t.Errorf("the orphan's files are still on %s", h)
		}
	}
	if got := orphans(); len(got) != 0 {
		t.Errorf("orphans after removal: %v", describe(got))
	}
	if s := f.status("kept"); s.Phase != workflows.PhaseReady || f.sandboxHost("kept", "kept-worker-0") == "" {
		t.Errorf("the running cluster was harmed: %s", s.Phase)
	}
}

func TestARestartedHostStartsItsMembersInDependencyOrderOnce(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2:rack=r2")
	specPath, trace := writeCluster(t, `
name: rebooted
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}, events: [configure, teardown, start], placement: {hosts: {rack: r2}}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE}, events: [configure, addnodes, delnodes, teardown, start], placement: {maxPerHost: 1}}
  - {name: edge, members: 1, dependsOn: [worker], startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {hosts: {rack: r2}}}
`)
	want := []string{"rebooted-controller-0@h2=ready", "rebooted-worker-0@h1=ready", "rebooted-worker-1@h2=ready", "rebooted-edge-0@h2=ready"}
	f.deploy(specPath, "rebooted", want...)
	// The machine restarts: everything on it dies, and it comes back with a new boot ID.
	f.killHost("h2")
	if err := os.WriteFile(f.hosts["h2"].bootID, []byte("boot-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	f.startHost("h2")
	// The dead worker's lease would break a host timeout after the kill; the restarted host
	// must have a lease of its own by then, taken when it registered.
	f.waitForHosts("h2 checked in again", func(hosts []workflows.HostDocument) bool {
		i := slices.IndexFunc(hosts, func(h workflows.HostDocument) bool { return h.Name == "h2" })
		return i >= 0 && hosts[i].State == workflows.HostReady && hosts[i].LastSeen.After(restarted)
	})
	waitFor(t, "the members on h2 started", func() bool {
		return len(runsOf(readTrace(t, trace), "", "start")) == 2 && f.status("rebooted").Phase == workflows.PhaseReady
	})
	after := f.status("rebooted")
	for _, m := range []string{"rebooted-controller-0", "rebooted-worker-1", "rebooted-edge-0"} {
		if h := after.Member(m).Health; h != nil {
			t.Errorf("%s changed health across a restart that came back within the host timeout: %+v", m, h.Transitions)
		}
	}
	runs := readTrace(t, trace)
	// Only the members on h2 whose role subscribes to start, each once (not the edge, which
	// does not subscribe, nor worker-0 on h1), the controller first.
	expectRuns(t, runs, "start", "--start", "rebooted-controller-0", "rebooted-worker-1")
	controller, worker := runsOf(runs, "rebooted-controller-0", "start"), runsOf(runs, "rebooted-worker-1", "start")
	if len(controller) == 1 && len(worker) == 1 && worker[0].Start < controller[0].End {
		t.Errorf("the worker started before the controller it depends on had: %+v %+v", controller, worker)
	}
	expectRuns(t, runs, "configure", "", "rebooted-controller-0", "rebooted-worker-0", "rebooted-worker-1", "rebooted-edge-0")
	if got := placements(f.status("rebooted")); !slices.Equal(got, want) {
		t.Errorf("after the restart: %v, want %v", got, want)
	}
}

// dev --hosts N runs N hosts in one process, each with its own data folder, so that a
// newcomer sees placement without a fleet.
func TestDevRunsSeveralHosts(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "state", "data")
	for _, h := range []string{"host-1", "host-2"} {
		testenv.StopAllAtEnd(t, filepath.Join(dir, "state", "hosts", h))
	}
	address := freeAddress(t)
	specPath, _ := writeCluster(t, "name: devhosts\nroles: [{name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}}]\n")
	dev := startDev(t, dir, "dev-hosts", []string{"dev", "--hosts", "2", "--no-ui", "--no-gateway", "--db", filepath.Join(dir, "dev.db"),
		"--data", data, "--address", address, "--log-file", filepath.Join(dir, "dev.log"), "-f", specPath})
	if err := dev.WaitFor("Ready.", time.Minute); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEMPORAL_ADDRESS=" + address}
	var s workflows.ClusterStatus
	waitFor(t, "devhosts ready", func() bool {
		res := run(t, env, "status", "devhosts", "-o", "json")
		return res.Code == 0 && json.Unmarshal([]byte(res.Stdout), &s) == nil && s.Phase == workflows.PhaseReady
	})
	if got := placements(s); !slices.Equal(got, []string{"devhosts-worker-0@host-1=ready", "devhosts-worker-1@host-2=ready"}) {
		t.Errorf("placed %v", got)
	}
	for i, h := range []string{"host-1", "host-2"} {
		if !exists(filepath.Join(clusterDir(filepath.Join(dir, "state", "hosts", h), "devhosts"), fmt.Sprintf("devhosts-worker-%d", i))) {
			t.Errorf("no sandbox of devhosts-worker-%d in %s's folder", i, h)
		}
	}
	if res := run(t, env, "hosts"); res.Code != 0 || strings.Count(res.Stdout, " ready ") != 2 {
		t.Errorf("hosts: %s", res)
	}
	// With maxPerHost 1, one host cannot hold both workers: draining either is refused by
	// name, and nothing moves.
	if res := run(t, env, "host", "drain", "host-1"); res.Code != 2 ||
		!strings.Contains(res.Stderr, "drain refused: without host host-1, cluster devhosts could not hold its members: roles[0].placement: 2 members with maxPerHost 1 need 2 hosts") {
		t.Errorf("drain beyond the placement: %s", res)
	}
	if res := run(t, env, "hosts"); res.Code != 0 || strings.Count(res.Stdout, " ready ") != 2 {
		t.Errorf("hosts after the refused drain: %s", res)
	}
	if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
		t.Errorf("dev did not stop cleanly: exit %d, %v\n%s", code, err, dev.Output())
	}
}

// The registry answers through the workflows' worker, and a server busy with a fleet may
// fail that worker's polls for seconds; once no poll came for its window (20 s), the
// server refuses a query it could not hand to a worker ("no poller seen"). The starter
// asks again for a while: `hosts` asked with the worker away past that window, and the
// worker back after the query's own 10 s, lists the fleet rather than failing.
func TestHostsAsksTheRegistryAgainWhileNoWorkerPolls(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	s.startWorker()
	sim := simulate(t, s, "sim", "sim", 1, time.Minute)
	if err := sim.WaitFor("Simulating hosts", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, time.Minute, time.Second, "the host ready", func() (bool, string) {
		return hostsIn(fleetHosts(t, s), workflows.HostReady, 1)
	})
	s.kill(s.worker)
	// Past matching.queryPollerUnavailableWindow, the server's memory of a poller.
	time.Sleep(22 * time.Second)
	asked := time.Now()
	answer := make(chan testenv.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := testenv.Run(ctx, t.TempDir(), s.env, "hosts")
		if err != nil {
			res = testenv.Result{Code: -1, Stderr: err.Error()}
		}
		answer <- res
	}()
	time.Sleep(11 * time.Second)
	s.startWorker()
	select {
	case res := <-answer:
		if res.Code != 0 || !strings.Contains(res.Stdout, "sim00000") {
			t.Fatalf("hosts, asked %s before the worker was back: %s", 11*time.Second, res)
		}
		t.Logf("hosts answered %s after it was asked", time.Since(asked).Round(100*time.Millisecond))
	case <-time.After(90 * time.Second):
		t.Fatal("hosts did not return within 90 s")
	}
}
