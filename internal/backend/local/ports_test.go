package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// portClaimsOfTheirOwn gives a test a folder of port claims of its own, not the machine's.
func portClaimsOfTheirOwn(t *testing.T) {
	saved := portClaimsDir
	portClaimsDir = t.TempDir()
	t.Cleanup(func() { portClaimsDir = saved })
}

// testPorts is a small range away from the default one, which e2e members use meanwhile.
var testPorts = PortRange{Low: 64100, High: 64111}

func portBackend(t *testing.T) *Backend {
	t.Helper()
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.Ports = testPorts
	return l
}

func assign(t *testing.T, l *Backend, c backend.ClusterRef, members ...string) backend.PortAssignment {
	t.Helper()
	req := backend.PortRequest{Cluster: c}
	for _, m := range members {
		req.Members = append(req.Members, backend.PortAsk{Member: m, Names: []string{"client", "peer"}})
	}
	got, err := l.AssignPorts(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Members of clusters of two data folders on one machine get distinct ports from the
// range, the same ones when asked again; a removed member's ports go to the next member,
// a claim whose cluster folder is gone is taken over, and a full range is refused naming
// --port-range.
func TestPortsAreDistinctMachineWideKeptAndFreed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("port claims are machine-wide for a root worker, as the tests run in CI")
	}
	portClaimsOfTheirOwn(t)
	a, b := portBackend(t), portBackend(t)
	ca, cb := backend.ClusterRef{Name: "c", Home: "aaaaaaaaaaaa"}, backend.ClusterRef{Name: "c", Home: "bbbbbbbbbbbb"}
	first := assign(t, a, ca, "c-w-0", "c-w-1", "c-w-2")
	second := assign(t, b, cb, "c-w-0", "c-w-1", "c-w-2")
	seen := map[int]string{}
	for who, got := range map[string]backend.PortAssignment{"a": first, "b": second} {
		for member, ports := range got {
			if len(ports) != 2 {
				t.Errorf("%s/%s got ports %v", who, member, ports)
			}
			for _, p := range ports {
				if p < testPorts.Low || p > testPorts.High {
					t.Errorf("%s/%s got port %d outside %s", who, member, p, testPorts)
				}
				if other, taken := seen[p]; taken {
					t.Errorf("port %d given to %s and %s/%s", p, other, who, member)
				}
				seen[p] = who + "/" + member
			}
		}
	}
	if again := assign(t, a, ca, "c-w-1"); fmt.Sprint(again["c-w-1"]) != fmt.Sprint(first["c-w-1"]) {
		t.Errorf("asked again, c-w-1 got %v, first %v", again["c-w-1"], first["c-w-1"])
	}
	// The range is full: twelve ports, all given.
	if _, err := a.AssignPorts(context.Background(), backend.PortRequest{Cluster: ca, Members: []backend.PortAsk{{Member: "c-w-3", Names: []string{"client"}}}}); err == nil || !strings.Contains(err.Error(), "--port-range") {
		t.Errorf("a full range: %v, want a refusal naming --port-range", err)
	}
	// A removed member frees its ports for the next one.
	if err := a.RemoveMember(context.Background(), backend.MemberRef{Cluster: "c", Home: "aaaaaaaaaaaa", Role: "w", Name: "c-w-0"}); err != nil {
		t.Fatal(err)
	}
	next := assign(t, a, ca, "c-w-3")
	if fmt.Sprint(next["c-w-3"]) != fmt.Sprint(first["c-w-0"]) {
		t.Errorf("the next member got %v, want the removed member's %v", next["c-w-3"], first["c-w-0"])
	}
	// b's data folder goes by hand: its claims are stale, and taken over.
	if err := os.RemoveAll(filepath.Join(b.root, "clusters")); err != nil {
		t.Fatal(err)
	}
	if taken := assign(t, a, ca, "c-w-4", "c-w-5", "c-w-6"); len(taken) != 3 {
		t.Errorf("stale claims were not taken over: %v", taken)
	}
	// Removing the cluster frees every port it held.
	if err := a.RemoveCluster(context.Background(), ca.Key()); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(portClaimsDir); len(left) != 2 { // the lock and the cursor
		t.Errorf("claims left after the cluster's removal: %v", left)
	}
}

// A removed member's ports go to nobody while the range has others free: its peers may
// still dial them. Once the range wraps they are given again, and a cursor left by a worker
// of another range starts this one's search at its own low end.
func TestAFreedPortIsGivenAgainOnlyAfterTheRestOfTheRange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("port claims are machine-wide for a root worker, as the tests run in CI")
	}
	portClaimsOfTheirOwn(t)
	l := portBackend(t)
	c := backend.ClusterRef{Name: "c", Home: "aaaaaaaaaaaa"}
	remove := func(member string) {
		t.Helper()
		if err := l.RemoveMember(context.Background(), backend.MemberRef{Cluster: "c", Home: "aaaaaaaaaaaa", Role: "w", Name: member}); err != nil {
			t.Fatal(err)
		}
	}
	first := assign(t, l, c, "c-w-0")["c-w-0"] // 64100, 64101
	remove("c-w-0")
	if got := assign(t, l, c, "c-w-1")["c-w-1"]; got["client"] != testPorts.Low+2 || got["peer"] != testPorts.Low+3 {
		t.Fatalf("the member after a removed one got %v, want the next two ports, not the freed %v", got, first)
	}
	// Eight more ports fill the range up to its high end; the next member wraps around to
	// the freed ones.
	assign(t, l, c, "c-w-2", "c-w-3", "c-w-4", "c-w-5")
	if got := assign(t, l, c, "c-w-6")["c-w-6"]; fmt.Sprint(got) != fmt.Sprint(first) {
		t.Errorf("after the range wrapped, the next member got %v, want the freed %v", got, first)
	}
	// A worker of another range, whose cursor lies outside this one's.
	other := portBackend(t)
	other.Ports = PortRange{Low: 64200, High: 64203}
	if got := assign(t, other, backend.ClusterRef{Name: "d", Home: "bbbbbbbbbbbb"}, "d-w-0")["d-w-0"]; got["client"] != 64200 {
		t.Errorf("a worker whose range the cursor lies outside got %v, want its range's first ports", got)
	}
}

// A host keeps the output of a cluster's last keptRemovedLogs removed members, and no more.
func TestTheOutputOfTheLastRemovedMembersIsKept(t *testing.T) {
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := backend.ClusterRef{Name: "c", Home: "aaaaaaaaaaaa"}
	removed, err := l.removedLogsDir(c)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	total := keptRemovedLogs + 2
	for i := range total {
		m := backend.MemberRef{Cluster: "c", Home: "aaaaaaaaaaaa", Role: "w", Name: fmt.Sprintf("c-w-%d", i)}
		sandbox, err := l.memberDir(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sandbox, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sandbox, "logs", "teardown.stdout"), []byte(m.Name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := l.keepRemovedLogs(m, sandbox); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(sandbox); err != nil { // as RemoveMember does next
			t.Fatal(err)
		}
		// Each kept a second after the one before.
		if err := os.Chtimes(filepath.Join(removed, m.Name), past, past.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(removed)
	if len(entries) != keptRemovedLogs {
		t.Fatalf("kept the output of %d removed members, want %d", len(entries), keptRemovedLogs)
	}
	for i := range total {
		_, err := os.Stat(filepath.Join(removed, fmt.Sprintf("c-w-%d", i), "logs", "teardown.stdout"))
		if kept := err == nil; kept != (i >= total-keptRemovedLogs) {
			t.Errorf("c-w-%d kept: %v", i, kept)
		}
	}
	chunk, err := l.ReadLog(context.Background(), backend.LogRequest{Member: backend.MemberRef{Cluster: "c", Home: "aaaaaaaaaaaa", Role: "w", Name: fmt.Sprintf("c-w-%d", total-1)}, Event: "teardown"})
	if err != nil || chunk.Missing || chunk.Stdout != fmt.Sprintf("c-w-%d\n", total-1) {
		t.Errorf("the removed member's output read back: %+v, %v", chunk, err)
	}
}
