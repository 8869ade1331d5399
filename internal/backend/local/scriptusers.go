package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// UIDRange gives each cluster on a host a user of its own, as systemd's DynamicUser does:
// the lowest free number of the range, as its user and group, kept in a host-local map
// so that a cluster keeps its user across restarts, and freed when the cluster's files go.
// Several workers may share the map (servers sharing a data folder, as a migration's
// source and target do): allocations and releases read it afresh under a file lock.
type UIDRange struct {
	First, Last uint32
	file        string
	mu          sync.Mutex
	// known are the users of clusters seen here: a cluster's user never changes while its
	// files are here, so a lookup needs no read.
	known map[string]uint32
	// records are the users' userdb records (userdb.go).
	records userRecords
}

// UseScriptUIDs gives each cluster a user of its own from first to last, both included,
// kept in the agent's folder.
func (l *Backend) UseScriptUIDs(first, last uint32) error {
	if first == 0 || last < first {
		return fmt.Errorf("%d-%d is not a range of unprivileged user IDs (FIRST-LAST, FIRST above 0)", first, last)
	}
	l.ScriptUIDs = &UIDRange{First: first, Last: last, file: filepath.Join(AgentDir(l.root), "script-uids.json"), known: map[string]uint32{}}
	return nil
}

// change runs edit on the map as it is on disk, under the map's file lock, and saves it
// when edit says so.
func (r *UIDRange) change(edit func(byCluster map[string]uint32) (save bool, err error)) error {
	if err := os.MkdirAll(filepath.Dir(r.file), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(r.file+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", r.file, err)
	}
	byCluster := map[string]uint32{}
	data, err := os.ReadFile(r.file)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &byCluster); err != nil {
			return fmt.Errorf("script users %s: %w", r.file, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	save, err := edit(byCluster)
	if err != nil || !save {
		return err
	}
	data, err = json.MarshalIndent(byCluster, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(r.file, data, 0o600)
}

// forCluster returns the cluster's user, allocating one the first time. Users are kept by
// the cluster's folder key: two clusters of one name (of two servers) have two users. A
// number the host already knows as a user (in /etc/passwd, say) is passed over.
func (r *UIDRange) forCluster(c layout.Cluster) (*runner.User, error) {
	cluster := c.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.known[cluster]; ok {
		return &runner.User{UID: uid, GID: uid}, nil
	}
	var uid uint32
	err := r.change(func(byCluster map[string]uint32) (bool, error) {
		if got, ok := byCluster[cluster]; ok {
			uid = got
			return false, nil
		}
		taken := map[uint32]bool{}
		for _, uid := range byCluster {
			taken[uid] = true
		}
		for candidate := r.First; candidate <= r.Last && candidate >= r.First; candidate++ {
			if taken[candidate] {
				continue
			}
			if !systemUser(candidate) && !leftBehind(candidate) {
				mine, err := r.claim(candidate)
				if err != nil {
					return false, err
				}
				if mine {
					uid, byCluster[cluster] = candidate, candidate
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("no script user left for cluster %s: all %d of --script-uids %d-%d are taken", cluster, r.Last-r.First+1, r.First, r.Last)
	})
	if err != nil {
		return nil, err
	}
	r.known[cluster] = uid
	return &runner.User{UID: uid, GID: uid}, nil
}

// lookup is the cluster's user, if it has one, without giving it one.
func (r *UIDRange) lookup(c layout.Cluster) (uint32, bool, error) {
	cluster := c.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.known[cluster]; ok {
		return uid, true, nil
	}
	var uid uint32
	var ok bool
	err := r.change(func(byCluster map[string]uint32) (bool, error) {
		uid, ok = byCluster[cluster]
		return false, nil
	})
	return uid, ok, err
}

// systemUser says the host knows uid as a user of its own (in /etc/passwd, say): not one
// of the script users' records (userdb.go), whichever data folder wrote it, which the
// machine-wide claims keep apart.
func systemUser(uid uint32) bool {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	return err == nil && u.Username != ScriptUserName(uid)
}

// sharedTemp are the folders every user may write in: what a script user leaves there is
// removed with its cluster, and a user with anything left there is never handed out.
var sharedTemp = []string{"/tmp", "/var/tmp", "/dev/shm"}

// killUser ends every process of a cluster's user, however it hid from the sweep by
// environment (a daemon that cleared or overwrote its environment, as Redis does for its
// process title), and removes what the user left in the shared temporary folders: the
// user dies with its cluster, or with the cluster's last member here.
func killUser(cluster layout.Cluster, uid uint32) error {
	if left := runner.KillUser(uid, 10*time.Second); len(left) > 0 {
		return fmt.Errorf("cluster %s's user %d still has processes %v after SIGKILL; it is kept until they are gone", cluster.Name, uid, left)
	}
	for _, path := range leftInTemp(uid) {
		// The entry is the dead user's, and the sticky folder lets nobody else replace
		// it; RemoveAll follows no link within it.
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove what cluster %s's user left: %w", cluster.Name, err)
		}
	}
	if err := runner.RemoveIPCOf(uid); err != nil {
		return fmt.Errorf("remove what cluster %s's user left in the kernel: %w", cluster.Name, err)
	}
	return nil
}

// leftBehind says whether anything of uid is left on the host that a new cluster must not
// inherit: a live process, a file it owns in a shared temporary folder, or an IPC object
// (shared memory, a semaphore, a message queue).
func leftBehind(uid uint32) bool {
	return len(runner.ProcessesOf(uid)) > 0 || len(leftInTemp(uid)) > 0 || len(runner.IPCOf(uid)) > 0
}

// leftInTemp lists what uid owns at the top of the shared temporary folders.
func leftInTemp(uid uint32) []string {
	var paths []string
	for _, dir := range sharedTemp {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				continue
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
	}
	return paths
}

// release frees the cluster's user once its files are gone.
func (r *UIDRange) release(c layout.Cluster) error {
	cluster := c.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, cluster)
	return r.change(func(byCluster map[string]uint32) (bool, error) {
		uid, ok := byCluster[cluster]
		delete(byCluster, cluster)
		if ok {
			if err := r.unclaim(uid); err != nil {
				return false, err
			}
			if err := r.records.remove(uid); err != nil {
				return false, err
			}
		}
		return ok, nil
	})
}

// userOf is who runs the cluster's scripts: a user of its own (ScriptUIDs), the one
// ScriptUser, or nil for the worker's user.
func (l *Backend) userOf(cluster layout.Cluster) (*runner.User, error) {
	if l.ScriptUIDs == nil {
		return l.ScriptUser, nil
	}
	u, err := l.ScriptUIDs.forCluster(cluster)
	if err != nil {
		return nil, err
	}
	home, err := l.layout.Tmp(cluster)
	if err != nil {
		return nil, err
	}
	l.ScriptUIDs.records.ensure(cluster, u, home, func(err error) {
		l.log().Warn("Could not give script users a name (a userdb record in "+userdbDir+"): their scripts run under a bare number, which getpwuid does not resolve", zap.Error(err))
	})
	return u, nil
}

// giveTo gives names in a sandbox to the script user u, when there is one.
func giveTo(u *runner.User, sandbox *os.Root, names ...string) error {
	for _, name := range names {
		if err := u.Own(sandbox, name); err != nil {
			return fmt.Errorf("give %s to the script user: %w", name, err)
		}
	}
	return nil
}

// ownClusterDir gives a cluster's folder to its own user's group, mode 0750, when each
// cluster has a user: its members read its scripts and configmeta, no other cluster can.
func (l *Backend) ownClusterDir(cluster layout.Cluster, dir string) error {
	if l.ScriptUIDs == nil {
		return nil
	}
	u, err := l.userOf(cluster)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Lchown(dir, os.Geteuid(), int(u.GID)); err != nil {
		return fmt.Errorf("give %s to cluster %s's group: %w", dir, cluster.Name, err)
	}
	return os.Chmod(dir, 0o750)
}

// ownSandbox makes a member's sandbox its script user's, if it is not yet: a sandbox made
// before scripts had users of their own (by a root worker of an earlier version) is given
// to the user whole, once, at the member's next event, so its app keeps its files. The
// walk stays within the sandbox, whatever links are in it.
func ownSandbox(u *runner.User, sandbox *os.Root) error {
	if u == nil {
		return nil
	}
	info, err := sandbox.Stat(".")
	if err != nil {
		return err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == u.UID && info.Mode().Perm() == 0o700 {
		return nil
	}
	err = fs.WalkDir(sandbox.FS(), ".", func(name string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return u.Own(sandbox, name)
	})
	if err != nil {
		return err
	}
	return sandbox.Chmod(".", 0o700)
}
