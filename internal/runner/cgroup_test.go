package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hiddenDaemons is a script body that leaves two daemons no sweep by environment finds:
// one started without the script's environment, one that writes over its environment for
// its process title, as Redis does. Each writes its PID into the folder named by $1.
const hiddenDaemons = `env -i setsid /bin/sh -c 'echo $$ > "$0/plain"; exec sleep 86400' "$1" < /dev/null > /dev/null 2>&1 &
setsid perl -e 'open(my $f, ">", "$ARGV[0]/titled"); print $f "$$\n"; close $f; $0 = "redis-server *:6379 " . ("x" x 4000); sleep 86400' "$1" < /dev/null > /dev/null 2>&1 &
`

func readPIDs(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && len(pids) < 2; time.Sleep(20 * time.Millisecond) {
		pids = nil
		for _, name := range []string{"plain", "titled"} {
			data, _ := os.ReadFile(filepath.Join(dir, name))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) < 2 {
		t.Fatalf("the daemons did not start: %v", pids)
	}
	return pids
}

func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}

// A member's cgroup holds every process its scripts started, hidden from an environment
// sweep or not, and KillCgroup ends them all and removes the cgroups; the cgroup of
// another member of the same cluster is left alone.
func TestKillCgroupEndsDaemonsThatHideTheirEnvironment(t *testing.T) {
	if os.Geteuid() != 0 || CgroupBase() == "" {
		t.Fatal("cgroups need the tests to run as root on a host with cgroup2, as CI does")
	}
	cluster := ClusterCgroup(t.TempDir(), "c@home")
	t.Cleanup(func() { _ = KillCgroup(cluster, 10*time.Second) })
	var pids [2][]int
	for i, member := range []string{"c-w-0", "c-w-1"} {
		s := script(t, hiddenDaemons)
		s.Args, s.Cgroup = []string{s.Sandbox}, filepath.Join(cluster, member)
		h := spawn(t, s)
		if code := waitExit(t, h); code != 0 {
			t.Fatalf("the script exited %d", code)
		}
		pids[i] = readPIDs(t, s.Sandbox)
	}
	if err := KillCgroup(filepath.Join(cluster, "c-w-1"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids[1] {
		if alive(pid) {
			t.Errorf("daemon %d of the removed member outlived its cgroup", pid)
		}
	}
	for _, pid := range pids[0] {
		if !alive(pid) {
			t.Errorf("daemon %d of the other member was killed too", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(cluster, "c-w-1")); !os.IsNotExist(err) {
		t.Errorf("the removed member's cgroup is still there: %v", err)
	}
	// The cluster's cgroup takes the rest with it.
	if err := KillCgroup(cluster, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids[0] {
		if alive(pid) {
			t.Errorf("daemon %d outlived its cluster's cgroup", pid)
		}
	}
	if _, err := os.Stat(cluster); !os.IsNotExist(err) {
		t.Errorf("the cluster's cgroup is still there: %v", err)
	}
}
