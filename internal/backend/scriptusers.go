package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// UIDRange gives each cluster on a host a user of its own, as systemd's DynamicUser does:
// the lowest free number of the range, as its user and group, kept in a host-local map
// so that a cluster keeps its user across restarts, and freed when the cluster's files go.
type UIDRange struct {
	First, Last uint32
	file        string
	mu          sync.Mutex
	// byCluster is the file's map, read once: this worker is the only one that writes it.
	byCluster map[string]uint32
}

// UseScriptUIDs gives each cluster a user of its own from first to last, both included,
// kept in the agent's folder.
func (l *Local) UseScriptUIDs(first, last uint32) error {
	if first == 0 || last < first {
		return fmt.Errorf("%d-%d is not a range of unprivileged user IDs (FIRST-LAST, FIRST above 0)", first, last)
	}
	l.ScriptUIDs = &UIDRange{First: first, Last: last, file: filepath.Join(AgentDir(l.root), "script-uids.json")}
	return nil
}

// load returns the map, reading the file the first time; the caller holds mu.
func (r *UIDRange) load() (map[string]uint32, error) {
	if r.byCluster != nil {
		return r.byCluster, nil
	}
	byCluster := map[string]uint32{}
	data, err := os.ReadFile(r.file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		if err := json.Unmarshal(data, &byCluster); err != nil {
			return nil, fmt.Errorf("script users %s: %w", r.file, err)
		}
	}
	r.byCluster = byCluster
	return byCluster, nil
}

func (r *UIDRange) save(byCluster map[string]uint32) error {
	data, err := json.MarshalIndent(byCluster, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.file), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(r.file, data, 0o600)
}

// forCluster returns the cluster's user, allocating one the first time. Users are kept by
// the cluster's folder key: two clusters of one name (of two servers) have two users.
func (r *UIDRange) forCluster(c layout.Cluster) (*runner.User, error) {
	cluster := c.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	byCluster, err := r.load()
	if err != nil {
		return nil, err
	}
	if uid, ok := byCluster[cluster]; ok {
		return &runner.User{UID: uid, GID: uid}, nil
	}
	taken := map[uint32]bool{}
	for _, uid := range byCluster {
		taken[uid] = true
	}
	for uid := r.First; uid <= r.Last && uid >= r.First; uid++ {
		if !taken[uid] {
			byCluster[cluster] = uid
			if err := r.save(byCluster); err != nil {
				delete(byCluster, cluster) // kept only once it is on disk
				return nil, err
			}
			return &runner.User{UID: uid, GID: uid}, nil
		}
	}
	return nil, fmt.Errorf("no script user left for cluster %s: all %d of --script-uids %d-%d are taken", cluster, r.Last-r.First+1, r.First, r.Last)
}

// release frees the cluster's user once its files are gone.
func (r *UIDRange) release(c layout.Cluster) error {
	cluster := c.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	byCluster, err := r.load()
	if err != nil {
		return err
	}
	uid, ok := byCluster[cluster]
	if !ok {
		return nil
	}
	delete(byCluster, cluster)
	if err := r.save(byCluster); err != nil {
		byCluster[cluster] = uid
		return err
	}
	return nil
}

// userOf is who runs the cluster's scripts: a user of its own (ScriptUIDs), the one
// ScriptUser, or nil for the worker's user.
func (l *Local) userOf(cluster layout.Cluster) (*runner.User, error) {
	if l.ScriptUIDs != nil {
		return l.ScriptUIDs.forCluster(cluster)
	}
	return l.ScriptUser, nil
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
func (l *Local) ownClusterDir(cluster layout.Cluster, dir string) error {
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
