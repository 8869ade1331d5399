package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
)

// keptSigned is how many signed manifests a host keeps of a cluster: the newest ones, which
// cover its current spec and the roles still being removed under an older one.
const keptSigned = 32

// writeSigned keeps the signed manifests a cluster's specs came with. One already there is
// marked the newest again, as the spec it belongs to is the current one.
func (l *Backend) writeSigned(cluster layout.Cluster, signed map[string]signing.Signed) error {
	if len(signed) == 0 {
		return nil
	}
	dir, err := l.layout.SignedDir(cluster)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, hash := range slices.Sorted(maps.Keys(signed)) {
		path := filepath.Join(dir, hash+".json")
		if err := os.Chtimes(path, now, now); err == nil {
			continue
		}
		data, err := json.Marshal(signed[hash])
		if err != nil {
			return err
		}
		if err := atomicfile.Write(path, data, 0o644); err != nil {
			return fmt.Errorf("write the signed spec: %w", err)
		}
	}
	files, err := l.signedFiles(cluster)
	if err != nil {
		return err
	}
	for _, old := range files[min(len(files), keptSigned):] {
		_ = os.Remove(old)
	}
	return nil
}

// signedFiles lists the cluster's signed manifests, newest first.
func (l *Backend) signedFiles(cluster layout.Cluster) ([]string, error) {
	dir, err := l.layout.SignedDir(cluster)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		files = append(files, file{filepath.Join(dir, e.Name()), info.ModTime()})
	}
	slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	return paths, nil
}

// signedMarkFile holds a namespace's high-water mark of a cluster name: in the agent's
// folder, out of every cluster's, so that a mark outlives its cluster.
func (l *Backend) signedMarkFile(name string) (string, error) {
	if err := spec.CheckName(name); err != nil {
		return "", fmt.Errorf("cluster name %w", err)
	}
	owner := l.Owner
	if owner == "" {
		owner = "unowned"
	} else if !validOwner.MatchString(owner) {
		return "", fmt.Errorf("owner %q is not a namespace ID", owner)
	}
	return filepath.Join(l.layout.Agent(), "signed-marks", owner, name), nil
}

// validOwner is what a namespace ID looks like (a UUID), as it names a folder.
var validOwner = regexp.MustCompile(`^[0-9A-Za-z-]{1,64}$`)

// raiseSignedMark keeps at as the cluster name's mark, if it is newer than the one kept.
func (l *Backend) raiseSignedMark(name string, at time.Time) error {
	if at.IsZero() {
		return nil
	}
	current, err := l.SignedMark(context.Background(), name)
	if err != nil || !at.After(current) {
		return err
	}
	file, err := l.signedMarkFile(name)
	if err != nil {
		return err
	}
	return atomicfile.Write(file, []byte(at.UTC().Format(time.RFC3339Nano)+"\n"), 0o600)
}

// SignedMark implements Backend.
func (l *Backend) SignedMark(_ context.Context, name string) (time.Time, error) {
	file, err := l.signedMarkFile(name)
	if err != nil {
		return time.Time{}, err
	}
	data, err := readSmall(file, 64)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
}

// SignedSpecs implements Backend: the manifests this host holds of a cluster, newest
// first, as they came.
func (l *Backend) SignedSpecs(_ context.Context, cluster backend.ClusterRef) ([]signing.Signed, error) {
	if err := l.refuseElsewhere(cluster); err != nil {
		return nil, err
	}
	files, err := l.signedFiles(cluster)
	if err != nil {
		return nil, err
	}
	var signed []signing.Signed
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var s signing.Signed
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("signed spec %s: %w", path, err)
		}
		signed = append(signed, s)
	}
	return signed, nil
}
