package e2e

import (
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cfcli "github.com/clusterflow/clusterflow/internal/cli"
	"github.com/clusterflow/clusterflow/internal/ports"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// A root host gives each cluster a user of its own, and everything a cluster lives through
// still works under them: the example registry cluster (whose members share files and a
// network service) and a second cluster run as two users; a resize, a host restart (the
// start event), a move to another server (export, import, retire) and a delete all work,
// nothing in a sandbox is ever root's, and nothing is left at the end.
func TestClustersLiveTheirWholeLifeAsUsersOfTheirOwn(t *testing.T) {
	t.Parallel()
	guard(t)
	if os.Geteuid() != 0 {
		t.Fatal("script users need the tests to run as root, as CI does")
	}
	f := newFleet(t, "h1")
	// The host again, as root with script users (the default once root scripts are not
	// allowed), on a data folder those users can pass through.
	f.killHost("h1")
	h := f.hosts["h1"]
	for dir := h.data; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	f.env = append(f.env, "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=")
	f.startHost("h1")
	f.waitForHosts("h1 ready with script users", func(hs []workflows.HostDocument) bool {
		return len(hs) == 1 && hs[0].State == workflows.HostReady
	})

	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := t.TempDir()
	if err := os.CopyFS(example, os.DirFS(filepath.Join(root, "examples/registry"))); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(example, "cluster.yaml")
	if res := f.cli("deploy", "-f", registry, "--wait"); res.Code != 0 {
		t.Fatalf("deploy the registry example: %s", res)
	}
	// The other cluster's script notes each event and who ran it, in its sandbox; its
	// configure leaves two daemons that hide from a sweep by environment: one started
	// without CLUSTERFLOW_MEMBER_DIR, one that writes over its environment for its
	// process title, as Redis does.
	other := filepath.Join(t.TempDir(), "other.yaml")
	script := filepath.Join(filepath.Dir(other), "note.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
echo "$CLUSTERFLOW_EVENT $(id -u)" >> events
if [ "$CLUSTERFLOW_EVENT" = configure ]; then
  env -u CLUSTERFLOW_MEMBER_DIR setsid sleep 86400 < /dev/null > /dev/null 2>&1 &
  setsid perl -e '$0 = "redis-server *:6379 " . ("x" x 4000); sleep 86400' < /dev/null > /dev/null 2>&1 &
fi
`), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("name: other\nroles:\n  - {name: m, members: 1, startscript: "+script+", events: [configure, addnodes, delnodes, teardown, start]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := f.cli("deploy", "-f", other, "--wait"); res.Code != 0 {
		t.Fatalf("deploy other: %s", res)
	}
	uidOf := func(cluster, member string) int {
		t.Helper()
		info, err := os.Stat(filepath.Join(clusterDir(h.data, cluster), member))
		if err != nil {
			t.Fatalf("%s's sandbox: %v", member, err)
		}
		return int(info.Sys().(*syscall.Stat_t).Uid)
	}
	demoUID, otherUID := uidOf("demo", "demo-controller-0"), uidOf("other", "other-m-0")
	if demoUID == otherUID || !inDefaultRange(t, demoUID) || !inDefaultRange(t, otherUID) {
		t.Fatalf("the clusters' users: demo %d, other %d; want two of %s", demoUID, otherUID, cfcli.DefaultScriptUIDs)
	}
	t.Cleanup(func() { runner.KillUser(uint32(otherUID), 10*time.Second) })
	waitFor(t, "other's 2 daemons to run as its user", func() bool { return len(runner.ProcessesOf(uint32(otherUID))) == 2 })
	noRootFiles := func(when string) {
		t.Helper()
		for cluster, uid := range map[string]int{"demo": demoUID, "other": otherUID} {
			folder := clusterDir(h.data, cluster)
			entries, _ := os.ReadDir(folder)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					continue // the cluster's own files (scripts, configmeta): the host's
				}
				_ = filepath.WalkDir(filepath.Join(folder, e.Name()), func(path string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					if info, err := d.Info(); err == nil && int(info.Sys().(*syscall.Stat_t).Uid) != uid {
						t.Errorf("%s: %s is owned by uid %d, not its cluster's %d", when, path, info.Sys().(*syscall.Stat_t).Uid, uid)
					}
					return nil
				})
			}
		}
	}
	noRootFiles("after the deploys")

	if res := f.cli("resize", "demo", "worker=4", "--wait"); res.Code != 0 {
		t.Fatalf("grow demo: %s", res)
	}
	if res := f.cli("resize", "demo", "worker=2", "--wait"); res.Code != 0 {
		t.Fatalf("shrink demo: %s", res)
	}
	noRootFiles("after the resizes")
	// A shrink of the other cluster ends its removed member's daemons, though they hide
	// from an environment sweep and the cluster's user lives on; the others' stay.
	if res := f.cli("resize", "other", "m=2", "--wait"); res.Code != 0 {
		t.Fatalf("grow other: %s", res)
	}
	waitFor(t, "other's 4 daemons to run as its user", func() bool { return len(runner.ProcessesOf(uint32(otherUID))) == 4 })
	if res := f.cli("resize", "other", "m=1", "--wait"); res.Code != 0 {
		t.Fatalf("shrink other: %s", res)
	}
	stays := filepath.Join(clusterDir(h.data, "other"), "other-m-0")
	waitFor(t, "only other-m-0's 2 daemons to be left", func() bool {
		left := runner.ProcessesOf(uint32(otherUID))
		for _, pid := range left {
			if cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err != nil || cwd != stays {
				return false
			}
		}
		return len(left) == 2
	})

	// The move: the clusters go to another server, whose worker for h1 runs over the same
	// sandboxes.
	maintenanceOn(f.stack, "moving")
	file := filepath.Join(t.TempDir(), "clusters.json")
	if res := f.cli("export", "--all", "-o", file); res.Code != 0 {
		t.Fatalf("export: %s", res)
	}
	port, err := ports.Reserve(f.net.Address)
	if err != nil {
		t.Fatal(err)
	}
	dst := newServerStackAt(t, net.JoinHostPort(f.net.Address, strconv.Itoa(port)))
	dstEnv := append(slices.Clone(dst.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=", "CLUSTERFLOW_BOOT_ID_FILE="+h.bootID)
	target := func(run int) *testenv.Process {
		return dst.startWith(testenv.StartHost, h.net.Namespace, dstEnv, "host-h1-target", run, "Worker starting",
			"worker", "--data", h.data, "--host", "h1", "--host-address", h.net.Address)
	}
	targetWorker := target(1)
	maintenanceOn(dst, "adopting")
	if res := dst.cli("import", "-f", file); res.Code != 0 {
		t.Fatalf("import: %s", res)
	}
	maintenanceOff(dst)
	if res := f.cli("export", "--retire", "demo", "other"); res.Code != 0 {
		t.Fatalf("retire: %s", res)
	}
	f.kill(h.worker) // the source's worker goes; the target's carries on
	if res := dst.cli("resize", "demo", "worker=3", "--wait"); res.Code != 0 {
		t.Fatalf("resize on the target: %s", res)
	}
	if got := uidOf("demo", "demo-worker-4"); got != demoUID { // after worker-3, which the shrink removed
		t.Errorf("demo's new member on the target runs as %d, not its cluster's %d", got, demoUID)
	}

	// The machine restarts: everything on it dies, and the other cluster's member gets its
	// start event, as its cluster's user.
	dst.kill(targetWorker)
	testenv.StopAll(h.data)
	if err := os.WriteFile(h.bootID, []byte("boot-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target(2)
	events := filepath.Join(clusterDir(h.data, "other"), "other-m-0", "events")
	waitFor(t, "other's member to start after the restart", func() bool {
		data, _ := os.ReadFile(events)
		return strings.Contains(string(data), "start "+strconv.Itoa(otherUID)+"\n")
	})
	noRootFiles("after the move and the restart")
	for _, c := range []string{"demo", "other"} {
		if res := dst.cli("delete", c, "--wait"); res.Code != 0 {
			t.Errorf("delete %s on the target: %s", c, res)
		}
	}
	waitFor(t, "nothing left on the host", func() bool {
		entries, _ := os.ReadDir(filepath.Join(h.data, "clusters"))
		return len(entries) == 0 && len(testenv.MemberProcesses(filepath.Join(h.data, "clusters"))) == 0
	})
	if left := runner.ProcessesOf(uint32(otherUID)); len(left) > 0 {
		t.Errorf("processes %v of other's user outlived its delete", left)
	}
	left, err := os.ReadFile(filepath.Join(h.data, "agent", "script-uids.json"))
	var users map[string]int
	if err != nil || json.Unmarshal(left, &users) != nil || len(users) != 0 {
		t.Errorf("script users after the deletes: %s, %v; want none", left, err)
	}
}
