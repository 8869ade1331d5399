package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
)

// A cluster's files on the host: its scripts and envs (named by their hash), its notices
// and its configmeta.

// WriteClusterFiles implements Backend. Scripts and envs are named by their hash, so one
// already there is already right; a notice replaces the ones long done.
func (l *Backend) WriteClusterFiles(_ context.Context, files backend.ClusterFiles) error {
	dir, err := l.layout.Cluster(files.Folder())
	if err != nil {
		return err
	}
	if err := l.claim(files.Folder(), dir, files.FolderKey); err != nil {
		return err
	}
	if err := l.ownClusterDir(files.Folder(), dir); err != nil {
		return err
	}
	for _, hash := range slices.Sorted(maps.Keys(files.Scripts)) {
		path, err := l.layout.Script(files.Folder(), hash)
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); err == nil {
			continue // named by content hash, so an existing file is already right
		}
		if err := atomicfile.Write(path, []byte(files.Scripts[hash]), 0o755); err != nil {
			return fmt.Errorf("install startscript: %w", err)
		}
	}
	for _, hash := range slices.Sorted(maps.Keys(files.Envs)) {
		path, err := l.layout.Env(files.Folder(), hash)
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); err == nil {
			continue
		}
		data, err := json.Marshal(files.Envs[hash])
		if err != nil {
			return err
		}
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			return fmt.Errorf("install env: %w", err)
		}
	}
	if err := l.raiseSignedMark(files.Cluster, files.SignedMark); err != nil {
		return err
	}
	if err := l.writeSigned(files.Folder(), files.Signed); err != nil {
		return err
	}
	if files.Notice != nil {
		if err := l.writeNotice(dir, *files.Notice); err != nil {
			return err
		}
	}
	if !files.HasConfigMeta() {
		return nil
	}
	meta := files.ConfigMeta
	meta.Members = slices.Clone(meta.Members)
	for i, node := range meta.Members {
		m := backend.MemberRef{Cluster: files.Cluster, Home: files.Home, Role: node.Role, Name: node.Name, Host: node.Host}
		if memberDir, err := l.memberDir(m); err == nil {
			meta.Members[i].Dir = memberDir
		}
		meta.Members[i].Address = l.MemberAddress(m, node.Address)
	}
	data, err := meta.Encode()
	if err != nil {
		return err
	}
	return atomicfile.Write(l.configMetaPath(dir), data, 0o644)
}

// keptNotices is how many notices a host keeps: a run names the newest, or, retried, one
// just before it; a cluster tells one notice at a time.
const keptNotices = 16

func (l *Backend) writeNotice(clusterDir string, n notice.Notice) error {
	folder := filepath.Join(clusterDir, ".clusterflow", "notices")
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(folder, fmt.Sprintf("%d.json", n.ID)), data, 0o600); err != nil {
		return fmt.Errorf("write notice: %w", err)
	}
	entries, _ := os.ReadDir(folder)
	for _, e := range entries {
		if id, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err == nil && id <= n.ID-keptNotices {
			_ = os.Remove(filepath.Join(folder, e.Name()))
		}
	}
	return nil
}

func (l *Backend) readNotice(c layout.Cluster, id int) (notice.Notice, error) {
	cluster := c.Name
	dir, err := l.layout.Cluster(c)
	if err != nil {
		return notice.Notice{}, err
	}
	data, err := readSmall(filepath.Join(dir, ".clusterflow", "notices", fmt.Sprintf("%d.json", id)), maxNoticeFile)
	if err != nil {
		return notice.Notice{}, fmt.Errorf("notice %d of cluster %s: %w", id, cluster, err)
	}
	var n notice.Notice
	if err := json.Unmarshal(data, &n); err != nil {
		return n, fmt.Errorf("notice %d of cluster %s: %w", id, cluster, err)
	}
	if err := n.Check(); err != nil {
		return n, err
	}
	if n.ID != id || n.Cluster != cluster {
		return n, fmt.Errorf("notice %d of cluster %s: the file holds notice %d of %s", id, cluster, n.ID, n.Cluster)
	}
	return n, nil
}

// Bounds on the files a launch reads: a notice names nodes by ordinal ranges, at most a
// few bytes each, and an env is at most spec.MaxRoleEnvBytes of JSON.
const (
	maxNoticeFile = 4 << 20
	maxEnvFile    = spec.MaxRoleEnvBytes + 1<<10
)

func (l *Backend) readEnv(c layout.Cluster, hash string) (map[string]string, error) {
	cluster := c.Name
	path, err := l.layout.Env(c, hash)
	if err != nil {
		return nil, err
	}
	data, err := readSmall(path, maxEnvFile)
	if err != nil {
		return nil, fmt.Errorf("env %s of cluster %s is not installed: %w", hash, cluster, err)
	}
	var env map[string]string
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("env %s of cluster %s: %w", hash, cluster, err)
	}
	if spec.EnvHash(env) != hash {
		return nil, fmt.Errorf("env %s of cluster %s: its content does not match its hash", hash, cluster)
	}
	return env, nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

func (l *Backend) configMetaPath(clusterDir string) string {
	return filepath.Join(clusterDir, ".clusterflow", "configmeta.json")
}
