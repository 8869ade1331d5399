package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/clusterflow/clusterflow/internal/backend/docker"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// A real etcd cluster in containers: the etcd example (examples/etcd) with an image the
// test builds from Debian's etcd-server, on a worker of --backend docker. Three members
// form a cluster; a grow to 5 joins the new ones by etcd's member add; a shrink to 3 has
// the leavers remove themselves; a member whose container was killed, reported gone, is
// replaced by one that rejoins in its place; the key written first is there after each;
// delete leaves no container, network or volume.
func TestEtcdRunsInContainers(t *testing.T) {
	// Serial, before the parallel tests: an engine starting containers takes both cores in
	// bursts, which pushed a parallel Web UI test past its deadline.
	guard(t)
	etcd, err1 := exec.LookPath("etcd")
	etcdctl, err2 := exec.LookPath("etcdctl")
	if err1 != nil || err2 != nil {
		t.Fatalf("etcd and etcdctl are needed (.ci/run installs etcd-server and etcd-client): %v %v", err1, err2)
	}
	engine, s := newDockerStack(t, "10.213.128.0/18", "61970-61979")
	engine.ImportImage(t, "clusterflow-test/etcd:1", map[string]string{"/usr/bin/etcd": etcd, "/usr/bin/etcdctl": etcdctl})
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(root, "examples", "etcd", "etcd.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "examples", "etcd", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(string(example), "    startscript: etcd.sh\n", "    startscript: etcd.sh\n    image: clusterflow-test/etcd:1\n", 1)
	if spec == string(example) {
		t.Fatal("examples/etcd/cluster.yaml no longer has the line the test adds the image after")
	}
	specPath := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = "etcd"
	container := func(ordinal int) string {
		return fmt.Sprintf("cf-%s-etcd-%d.%s", n, ordinal, s.status(n).Home)
	}
	// etcdctl runs in a member's container, against that member.
	etcdctlIn := func(ordinal int, args ...string) (string, error) {
		m := fmt.Sprintf("%s-etcd-%d", n, ordinal)
		st := s.status(n)
		member := st.Member(m)
		if member == nil || member.Ports["client"] == 0 {
			t.Fatalf("%s has no client port: %+v", m, member)
		}
		endpoint := fmt.Sprintf("http://%s:%d", m, member.Ports["client"])
		return engine.Exec(container(ordinal), append([]string{"env", "ETCDCTL_API=3", "etcdctl", "--endpoints", endpoint, "--command-timeout", "10s"}, args...)...)
	}
	members := func(ordinal int) []string {
		t.Helper()
		out, err := etcdctlIn(ordinal, "member", "list")
		if err != nil {
			t.Fatalf("member list: %v: %s", err, out)
		}
		return startedEtcdMembers(out)
	}
	names := func(ordinals ...int) []string { return etcdMemberNames(n, ordinals...) }
	firstKey := func(ordinal int, when string) {
		t.Helper()
		if out, err := etcdctlIn(ordinal, "get", "first", "--print-value-only"); err != nil || strings.TrimSpace(out) != "written first" {
			t.Errorf("%s: the first key reads %q (%v)", when, out, err)
		}
	}
	step := func(what string, args ...string) {
		t.Helper()
		start := time.Now()
		if res := s.cli(args...); res.Code != 0 {
			t.Fatalf("%s: %s\n%s", what, res, s.cli("status", n))
		}
		t.Logf("etcd in containers, %s: %.1f s", what, time.Since(start).Seconds())
	}

	step("deploy 3", "deploy", "-f", specPath, "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 1, 2)) {
		t.Fatalf("after the deploy, etcd's members are %v", got)
	}
	if out, err := etcdctlIn(0, "put", "first", "written first"); err != nil {
		t.Fatalf("put: %v: %s", err, out)
	}
	step("grow to 5", "resize", n, "etcd=5", "--wait", "--timeout", "2m")
	if got := members(4); !slices.Equal(got, names(0, 1, 2, 3, 4)) {
		t.Errorf("after the grow, etcd's members are %v", got)
	}
	firstKey(4, "after the grow, read from a joiner")
	step("shrink to 3", "resize", n, "etcd=3", "--wait", "--timeout", "2m")
	if got := members(0); !slices.Equal(got, names(0, 1, 2)) {
		t.Errorf("after the shrink, etcd's members are %v", got)
	}

	// A member's container is killed; reported gone, it is replaced by the next ordinal,
	// whose configure removes it from etcd's membership before joining.
	ctx := t.Context()
	if _, err := engine.Client.ContainerKill(ctx, container(1), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if res := s.cli("signal", n, n+"-etcd-1", "gone", "--reason", "container killed"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	waitUpTo(t, 2*time.Minute, "the killed member replaced", func() bool {
		st := s.status(n)
		if st.Phase == workflows.PhaseFailed {
			t.Fatalf("the replacement failed: %s", s.cli("status", n))
		}
		m := st.Member(n + "-etcd-5")
		return st.Phase == workflows.PhaseReady && m != nil && m.State == workflows.MemberReady && st.Member(n+"-etcd-1") == nil
	})
	t.Logf("etcd in containers, replace a killed container: %.1f s", time.Since(start).Seconds())
	if got := members(5); !slices.Equal(got, names(0, 2, 5)) {
		t.Errorf("after the replacement, etcd's members are %v", got)
	}
	firstKey(5, "after the replacement, read from the successor")

	home := s.status(n).Home
	step("delete", "delete", n, "--wait", "--timeout", "2m")
	if c, nets, v := engine.Leftovers(t, docker.LabelCluster+"="+n+"@"+home); c+nets+v != 0 {
		t.Errorf("after the delete: %d containers, %d networks and %d volumes left", c, nets, v)
	}
}
