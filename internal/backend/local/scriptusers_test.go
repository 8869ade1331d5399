package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// Each cluster gets the lowest free user of the range and keeps it, across a new backend
// on the same folder too; a removed cluster frees its user; a full range says so.
func TestClustersGetUsersOfTheirOwnFromTheRange(t *testing.T) {
	claimsOfTheirOwn(t)
	root := t.TempDir()
	l, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UseScriptUIDs(64000, 64001); err != nil {
		t.Fatal(err)
	}
	uid := func(l *Backend, cluster string) uint32 {
		t.Helper()
		u, err := l.userOf(layout.Cluster{Name: cluster})
		if err != nil {
			t.Fatal(err)
		}
		if u.GID != u.UID {
			t.Errorf("cluster %s: group %d, want its user's number %d", cluster, u.GID, u.UID)
		}
		return u.UID
	}
	if a, b := uid(l, "a"), uid(l, "b"); a != 64000 || b != 64001 {
		t.Errorf("a=%d b=%d, want 64000 and 64001", a, b)
	}
	if _, err := l.userOf(layout.Cluster{Name: "c"}); err == nil || !strings.Contains(err.Error(), "all 2 of --script-uids 64000-64001 are taken") {
		t.Errorf("a full range: %v", err)
	}
	again, _ := New(root)
	_ = again.UseScriptUIDs(64000, 64001)
	if b := uid(again, "b"); b != 64001 {
		t.Errorf("after a restart b has %d, want 64001", b)
	}
	if err := l.ScriptUIDs.release(layout.Cluster{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if c := uid(l, "c"); c != 64000 {
		t.Errorf("c got %d, want a's freed 64000", c)
	}
	if err := (&Backend{}).UseScriptUIDs(0, 10); err == nil {
		t.Error("a range from 0 (root) was taken")
	}
}

// Workers sharing a data folder (two servers' workers, as a migration's source and target
// are) share its users: clusters allocated through either, at the same time, never get
// the same user, and one's release is seen by the other.
func TestWorkersSharingAFolderNeverGiveTwoClustersOneUser(t *testing.T) {
	claimsOfTheirOwn(t)
	root := t.TempDir()
	var workers [2]*Backend
	for i := range workers {
		l, err := New(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.UseScriptUIDs(64000, 64099); err != nil {
			t.Fatal(err)
		}
		workers[i] = l
	}
	const clusters = 40
	uids := make([]uint32, 2*clusters)
	errs := make(chan error, len(uids))
	for i := range uids {
		go func() {
			u, err := workers[i%2].userOf(layout.Cluster{Name: fmt.Sprintf("c%d", i)})
			if err == nil {
				uids[i] = u.UID
			}
			errs <- err
		}()
	}
	for range uids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint32]int{}
	for i, uid := range uids {
		if j, ok := seen[uid]; ok {
			t.Errorf("clusters c%d and c%d both got user %d", j, i, uid)
		}
		seen[uid] = i
	}
	if err := workers[0].ScriptUIDs.release(layout.Cluster{Name: "c0"}); err != nil {
		t.Fatal(err)
	}
	if u, err := workers[1].userOf(layout.Cluster{Name: "new"}); err != nil || u.UID != uids[0] {
		t.Errorf("a cluster after c0's release got %v, %v; want its freed user %d", u, err, uids[0])
	}
}

// A number the host already knows as a user is never given to a cluster.
func TestAUserTheHostKnowsIsPassedOver(t *testing.T) {
	claimsOfTheirOwn(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseUint(nobody.Uid, 10, 32)
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UseScriptUIDs(uint32(id), uint32(id)+1); err != nil {
		t.Fatal(err)
	}
	if u, err := l.userOf(layout.Cluster{Name: "c"}); err != nil || u.UID != uint32(id)+1 {
		t.Errorf("the first cluster got %v, %v; want %d, past nobody's %d", u, err, id+1, id)
	}
}

// A sandbox made before scripts had users of their own (root's, 0755) is given whole to
// its cluster's user at the member's next event, once: its app keeps its files.
func TestASandboxFromBeforeScriptUsersIsGivenToItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("giving files to another user needs root, as CI runs the tests")
	}
	dir := filepath.Join(t.TempDir(), "c-w-0")
	if err := os.MkdirAll(filepath.Join(dir, "app", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app", "data", "db"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Links out of the sandbox, as an app may have left (or a member planted): what they
	// lead to stays root's.
	victim := filepath.Join(filepath.Dir(dir), "victim")
	if err := os.WriteFile(victim, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"absolute": victim, "relative": "../../victim"} {
		if err := os.Symlink(target, filepath.Join(dir, "app", name)); err != nil {
			t.Fatal(err)
		}
	}
	u := &runner.User{UID: 65534, GID: 65534}
	sandbox, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close()
	if err := ownSandbox(u, sandbox); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(victim); err != nil || info.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("a file a link in the sandbox leads to was given away: %v", err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "app"), filepath.Join(dir, "app", "data", "db")} {
		info, err := os.Stat(p)
		if err != nil || info.Sys().(*syscall.Stat_t).Uid != u.UID {
			t.Errorf("%s not the script user's after the upgrade: %v", p, err)
		}
	}
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("the sandbox is %04o, want 0700", info.Mode().Perm())
	}
}

// A cluster's user dies with the cluster: a process of its user that hid from the sweep by
// environment (started without it, as `env -u` does, or with its environment written over,
// as Redis does for its process title) is killed by the cluster's removal, and what the
// user left in /tmp goes too. A number with a process left (one an older version freed) is
// never given to another cluster.
func TestAClustersUserDiesWithItAndIsNeverHandedOnWhileAnythingOfItIsLeft(t *testing.T) {
	claimsOfTheirOwn(t)
	if os.Geteuid() != 0 {
		t.Fatal("running a process as a script user needs root, as CI runs the tests")
	}
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UseScriptUIDs(64100, 64102); err != nil {
		t.Fatal(err)
	}
	hidden := func(uid uint32, args ...string) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no CLUSTERFLOW_MEMBER_DIR
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	c := layout.Cluster{Name: "leaver", Home: "0123456789ab"}
	u, err := l.userOf(c)
	if err != nil {
		t.Fatal(err)
	}
	hidden(u.UID, "sleep", "300")
	hidden(u.UID, "perl", "-e", `$0 = "redis-server *:6379 " . ("x" x 4000); sleep 300`)
	leftover := filepath.Join(os.TempDir(), fmt.Sprintf("clusterflow-test-left-%d", u.UID))
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(leftover) })
	if err := os.Chown(leftover, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	if n := len(runner.ProcessesOf(u.UID)); n != 2 {
		t.Fatalf("%d processes run as %d, want the 2 started", n, u.UID)
	}
	if err := l.RemoveCluster(context.Background(), c.Key()); err != nil {
		t.Fatal(err)
	}
	if left := runner.ProcessesOf(u.UID); len(left) > 0 {
		t.Errorf("processes %v of the removed cluster's user are still running", left)
	}
	if _, err := os.Lstat(leftover); err == nil {
		t.Errorf("%s, left by the removed cluster's user, is still there", leftover)
	}
	if again, err := l.userOf(layout.Cluster{Name: "after"}); err != nil || again.UID != u.UID {
		t.Errorf("a cluster after the removal got %v, %v; want the freed user %d", again, err, u.UID)
	}
	hidden(64101, "sleep", "300")
	if next, err := l.userOf(layout.Cluster{Name: "next"}); err != nil || next.UID != 64102 {
		t.Errorf("with a process of 64101 left, a new cluster got %v, %v; want 64102", next, err)
	}
}

// Workers of two data folders on one machine (two hosts of one dev, say) claim their
// users machine-wide: they never give one number to two clusters, and a number held by a
// folder since deleted is free again.
func TestTwoDataFoldersNeverGiveOneUserToTwoClusters(t *testing.T) {
	claimsOfTheirOwn(t)
	backendOn := func(root string) *Backend {
		l, err := New(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.UseScriptUIDs(64200, 64201); err != nil {
			t.Fatal(err)
		}
		return l
	}
	gone := t.TempDir()
	a, b := backendOn(gone), backendOn(t.TempDir())
	ua, err := a.userOf(layout.Cluster{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ub, err := b.userOf(layout.Cluster{Name: "y"})
	if err != nil || ub.UID == ua.UID {
		t.Fatalf("the second folder's cluster got %v, %v; the first's has %d", ub, err, ua.UID)
	}
	if err := b.RemoveCluster(context.Background(), "y"); err != nil {
		t.Fatal(err)
	}
	// The first folder goes without releasing its user: its claim is stale once its map is
	// gone (and past a minute old).
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	claim := filepath.Join(uidClaimsDir, strconv.FormatUint(uint64(ua.UID), 10))
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(claim, old, old); err != nil {
		t.Fatal(err)
	}
	c := backendOn(t.TempDir())
	for _, name := range []string{"p", "q"} {
		if _, err := c.userOf(layout.Cluster{Name: name}); err != nil {
			t.Errorf("cluster %s with the first folder gone: %v", name, err)
		}
	}
}

// A cluster's user gets a userdb record (a name, a group, a home) when it is given, and
// loses it with the cluster's user: records of the users still given stay.
func TestAClustersUserHasARecordWhileItIsGiven(t *testing.T) {
	claimsOfTheirOwn(t)
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UseScriptUIDs(64300, 64301); err != nil {
		t.Fatal(err)
	}
	a, b := layout.Cluster{Name: "a"}, layout.Cluster{Name: "b"}
	for _, c := range []layout.Cluster{a, b} {
		if _, err := l.userOf(c); err != nil {
			t.Fatal(err)
		}
	}
	record := func(name string) string {
		data, _ := os.ReadFile(filepath.Join(userdbDir, name))
		return string(data)
	}
	for uid, cluster := range map[string]string{"64300": "a", "64301": "b"} {
		if rec := record(uid + ".user"); !strings.Contains(rec, `"userName":"clusterflow-`+uid+`"`) || !strings.Contains(rec, "clusterflow cluster "+cluster) {
			t.Errorf("%s's record by number: %q", cluster, rec)
		}
		if rec := record("clusterflow-" + uid + ".group"); !strings.Contains(rec, `"gid":`+uid) {
			t.Errorf("%s's group: %q", cluster, rec)
		}
	}
	if err := l.ScriptUIDs.release(a); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"64300.user", "64300.group", "clusterflow-64300.user", "clusterflow-64300.group"} {
		if _, err := os.Lstat(filepath.Join(userdbDir, f)); err == nil {
			t.Errorf("%s is left after a's user went", f)
		}
	}
	if record("64301.user") == "" {
		t.Error("b's record went with a's")
	}
}
