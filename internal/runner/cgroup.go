package runner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A member's scripts run in a cgroup (v2) of the member's own, inside one of its cluster's,
// so that whatever a script leaves running is found again at the member's removal: a
// daemon that forked, left its session, cleared its environment or wrote over it (as
// Redis does for its process title) is still in the cgroup, and cannot leave it (its
// cgroup.procs files are root's). The process is put there by the kernel as it is
// created (clone3's CLONE_INTO_CGROUP), so not even its first instruction runs outside.
//
// Cgroups are for an agent that may make them: root, at the top of the cgroup2 mount
// (where they outlive a login session the agent was started from), or anyone in the
// cgroup they were given (delegated: systemd's Delegate=yes, or a folder of the hierarchy
// chowned to them), below their own. Elsewhere scripts start as before, and removal finds
// their processes by environment (and by user, with script users) alone.

// CgroupBase is the folder clusterflow's cgroups go in: clusterflow/ at the top of the
// cgroup2 mount, or below this process's own cgroup when only that is this process's to
// write; "" when neither is (no cgroup2, or nothing delegated). It is looked up once.
var CgroupBase = sync.OnceValue(func() string {
	mount := cgroup2Mount()
	if mount == "" {
		return ""
	}
	for _, parent := range []string{mount, ownCgroup(mount)} {
		if parent == "" {
			continue
		}
		if base := filepath.Join(parent, "clusterflow"); usableCgroup(base) {
			return base
		}
	}
	return ""
})

// usableCgroup makes base if need be and says whether this process may make cgroups in it.
func usableCgroup(base string) bool {
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	probe, err := os.MkdirTemp(base, ".probe-")
	if err != nil {
		return false
	}
	_ = syscall.Rmdir(probe)
	return true
}

// ownCgroup is this process's cgroup (v2) folder, from /proc/self/cgroup ("0::/path").
func ownCgroup(mount string) string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok && path != "/" && !strings.Contains(path, "..") {
			return filepath.Join(mount, path)
		}
	}
	return ""
}

// Cgroup2Mount is where the cgroup2 hierarchy is mounted, or "".
func Cgroup2Mount() string { return cgroup2Mount() }

// cgroup2Mount finds where the cgroup2 hierarchy is mounted, from /proc/self/mountinfo
// (at /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one).
func cgroup2Mount() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(right, "cgroup2 ") {
			continue
		}
		if f := strings.Fields(left); len(f) >= 5 && f[3] == "/" {
			return f[4]
		}
	}
	return ""
}

// DataCgroup holds the cgroups of the host whose data folder is dataRoot, or is "" when
// cgroups are not made here. The data folder's hash keeps apart hosts that share a
// machine (and the tests' many workers).
func DataCgroup(dataRoot string) string {
	base := CgroupBase()
	if base == "" {
		return ""
	}
	abs, err := filepath.Abs(dataRoot)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(base, hex.EncodeToString(sum[:6]))
}

// ClusterCgroup is the cgroup of a cluster's folder (its name in the data folder), or ""
// as DataCgroup.
func ClusterCgroup(dataRoot, clusterFolder string) string {
	if d := DataCgroup(dataRoot); d != "" {
		return filepath.Join(d, clusterFolder)
	}
	return ""
}

// MemberCgroup is a member's cgroup in its cluster's, or "" as ClusterCgroup.
func MemberCgroup(dataRoot, clusterFolder, member string) string {
	if c := ClusterCgroup(dataRoot, clusterFolder); c != "" {
		return filepath.Join(c, member)
	}
	return ""
}

// openCgroup makes the cgroup if need be and opens it for CLONE_INTO_CGROUP.
func openCgroup(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("make the member's cgroup: %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the member's cgroup: %w", err)
	}
	return fd, nil
}

// KillCgroup kills every process in the cgroup and the cgroups below it, waits up to
// within for them to be gone, and removes the cgroups. A cgroup that is not there is
// fine. It returns what is still running when it gives up.
func KillCgroup(dir string, within time.Duration) error {
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(within)
	for {
		// cgroup.kill (Linux 5.14) kills the whole subtree at once, forks racing it
		// included; without it, each process is sent SIGKILL, and swept again.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			for _, pid := range cgroupProcs(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		left := cgroupProcs(dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v are still in cgroup %s after SIGKILL", left, dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return removeCgroups(dir)
}

// cgroupProcs lists the processes in the cgroup and every cgroup below it. A zombie leaves
// its cgroup as it dies, so only processes that can still run are listed.
func cgroupProcs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, line := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(line); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cgroup and those below it, deepest first: a cgroup folder goes
// by rmdir, with its control files in it, once no process is left.
func removeCgroups(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
	}
	return nil
}
