package local

import (
	"os"
	"strings"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
)

// claim marks the cluster's folder as the worker's namespace's: whoever writes a cluster's
// files now runs it. A cluster moved to another server (export, import) becomes the
// target's at its first write there, after which the source's orphan removal passes it by.
func (l *Backend) claim(c layout.Cluster, dir string) error {
	if l.Owner == "" || l.ownerOf(c) == l.Owner {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path, err := l.layout.OwnerFile(c)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(l.Owner+"\n"), 0o644)
}

// ownerOf is the namespace ID that last wrote the cluster's folder; empty for a folder of
// before owners, or none.
func (l *Backend) ownerOf(c layout.Cluster) string {
	path, err := l.layout.OwnerFile(c)
	if err != nil {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// refuseElsewhere is the error for removing anything of a folder another server or
// namespace owns, or nil when it is this worker's (or of before owners).
func (l *Backend) refuseElsewhere(c layout.Cluster) error {
	if owner := l.ownerOf(c); owner != "" && l.Owner != "" && owner != l.Owner {
		return &backend.OwnedElsewhereError{Key: c.Key(), Owner: owner}
	}
	return nil
}
