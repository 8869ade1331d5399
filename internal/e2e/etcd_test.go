package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

// TestEtcdLivesThroughTheLifecycle runs the etcd example (examples/etcd) through the real
// CLI: deploy 3, grow to 5 (the joiners add themselves), a graceful shrink to 3 (the
// leavers remove themselves in their decommission) that keeps every key, a member whose
// etcd is killed replaced (its successor removes it first), a failed member retried, and a
// delete that leaves no etcd running.
func TestEtcdLivesThroughTheLifecycle(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "etcdc"
	app := newRealApp(t, "etcd", "etcd.sh", n, "", "etcd.pid", "etcd", "etcdctl")
	// A member's client endpoint, from the port clusterflow gave it.
	endpoint := func(ordinal int) string {
		s := statusJSON(t, n)
		m := s.Member(fmt.Sprintf("%s-etcd-%d", n, ordinal))
		if m == nil || m.Ports["client"] == 0 {
			t.Fatalf("%s-etcd-%d has no client port: %+v", n, ordinal, m)
		}
		return fmt.Sprintf("http://127.0.0.1:%d", m.Ports["client"])
	}
	etcdctl := func(ordinal int, args ...string) (string, error) {
		cmd := exec.Command("etcdctl", append([]string{"--endpoints", endpoint(ordinal), "--command-timeout", "10s"}, args...)...)
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// members lists etcd's own membership, as a survivor sees it: the started members' names.
	members := func(ordinal int) []string {
		t.Helper()
		out, err := etcdctl(ordinal, "member", "list")
		if err != nil {
			t.Fatalf("member list: %v: %s", err, out)
		}
		return startedEtcdMembers(out)
	}
	keysIntact := func(ordinal int, when string) {
		t.Helper()
		out, err := etcdctl(ordinal, "get", "key-", "--prefix", "--keys-only")
		if err != nil || strings.Count(out, "key-") != 50 {
			t.Errorf("%s: want the 50 keys, got %v: %d in %q", when, err, strings.Count(out, "key-"), out)
		}
	}
	names := func(ordinals ...int) []string { return etcdMemberNames(n, ordinals...) }
	step := func(what string, args ...string) {
		t.Helper()
		start := time.Now()
		if res := cli(t, args...); res.Code != 0 {
			t.Fatalf("%s: %s", what, res)
		}
		app.notePIDs()
		t.Logf("etcd %s: %.1f s", what, time.Since(start).Seconds())
	}

	step("deploy 3", "deploy", "-f", app.specPath, "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 1, 2)) {
		t.Fatalf("after the deploy, etcd's members are %v", got)
	}
	first := endpoint(0)
	for i := range 50 {
		cmd := exec.Command("etcdctl", "--endpoints", first, "put", fmt.Sprintf("key-%02d", i), "value")
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("put: %v: %s", err, out)
		}
	}
	step("grow to 5", "resize", n, "etcd=5", "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 1, 2, 3, 4)) {
		t.Errorf("after the grow, etcd's members are %v", got)
	}
	step("shrink to 3", "resize", n, "etcd=3", "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 1, 2)) {
		t.Errorf("after the shrink, etcd's members are %v", got)
	}
	keysIntact(0, "after the shrink")

	// A member's etcd dies; reported gone, it is replaced by the next ordinal, whose
	// configure removes it from etcd's membership before joining.
	_ = syscallKill(app.pidOf(n + "-etcd-1"))
	start := time.Now()
	mustSucceed(t, "signal", n, n+"-etcd-1", "gone", "--reason", "etcd killed")
	waitUpTo(t, 2*time.Minute, "the killed member replaced", func() bool {
		s := statusJSON(t, n)
		if s.Phase == workflows.PhaseFailed {
			t.Fatalf("the replacement failed: %s", cli(t, "status", n))
		}
		return s.Phase == workflows.PhaseReady && s.Member(n+"-etcd-5") != nil && s.Member(n+"-etcd-5").State == workflows.MemberReady && s.Member(n+"-etcd-1") == nil
	})
	app.notePIDs()
	t.Logf("etcd replace a killed member: %.1f s", time.Since(start).Seconds())
	if got := members(0); !slices.Equal(got, names(0, 2, 5)) {
		t.Errorf("after the replacement, etcd's members are %v", got)
	}
	keysIntact(5, "after the replacement, read from the successor")

	// A new member fails its configure; once the cause is gone, retry sets it up.
	app.failConfigures(true)
	if res := cli(t, "resize", n, "etcd=4", "--wait", "--timeout", "2m"); res.Code != 1 || !strings.Contains(res.Stdout, "injected failure") {
		t.Fatalf("a grow whose configure fails: %s", res)
	}
	app.failConfigures(false)
	step("retry a failed member", "retry", n, "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 2, 5, 6)) {
		t.Errorf("after the retry, etcd's members are %v", got)
	}
	keysIntact(6, "after the retry, read from the retried member")

	step("delete", "delete", n, "--wait", "--timeout", "2m")
	app.noneOutlived()
	if len(app.pids) < 7 {
		t.Errorf("only %d etcd processes were seen, want one per member (7)", len(app.pids))
	}
}

// startedEtcdMembers reads etcdctl's member list: the started members' names, sorted.
func startedEtcdMembers(list string) []string {
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if f := strings.Split(line, ", "); len(f) > 3 && f[1] == "started" {
			names = append(names, f[2])
		}
	}
	slices.Sort(names)
	return names
}

// etcdMemberNames names the members of the etcd example's role in cluster, sorted.
func etcdMemberNames(cluster string, ordinals ...int) []string {
	var out []string
	for _, o := range ordinals {
		out = append(out, fmt.Sprintf("%s-etcd-%d", cluster, o))
	}
	slices.Sort(out)
	return out
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
