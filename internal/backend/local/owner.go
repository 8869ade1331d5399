package local

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
)

// A cluster's folder belongs to the namespace (its ID, unique across servers) that made
// it, and is marked with the cluster's folder key (its hash: backend.ClusterFiles.FolderKey).
// Another namespace's worker may neither write nor read nor remove anything in it, unless
// a write of its presents the key: an import of the cluster's export, which carries it,
// takes the folder over so. Folders of before owners, or written by a worker that could
// not learn its namespace's ID, are anyone's, as they always were.

// claim marks the cluster's folder as the calling worker's namespace's, and with the key's
// hash when it has none yet; a folder another namespace owns is taken over only with its
// key.
func (l *Backend) claim(c layout.Cluster, dir, key string) error {
	if l.Owner == "" {
		return nil
	}
	owner := l.ownerOf(c)
	stored := l.folderKeyOf(c)
	switch {
	case owner == "" || owner == l.Owner:
	case key != "" && stored != "" && subtle.ConstantTimeCompare([]byte(stored), []byte(keyHash(key))) == 1:
		l.log().Info("Cluster folder handed over with its key", zap.String("cluster", c.Key()), zap.String("from", owner), zap.String("to", l.Owner))
	case stored == "" && key != "":
		// Marked before folder keys: the first key to write it (its owner's, at its next
		// change, or an import's) takes it, as any write once did.
		l.log().Warn("Cluster folder of before folder keys taken by the first key to write it", zap.String("cluster", c.Key()), zap.String("from", owner), zap.String("to", l.Owner))
	default:
		return &backend.OwnedElsewhereError{Key: c.Key(), Owner: owner}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if key != "" && stored == "" {
		path, err := l.layout.FolderKeyFile(c)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(path, []byte(keyHash(key)+"\n"), 0o600); err != nil {
			return err
		}
	}
	if owner == l.Owner {
		return nil
	}
	path, err := l.layout.OwnerFile(c)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(l.Owner+"\n"), 0o644)
}

// keyHash is what a folder keeps of its key.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ownerOf is the namespace ID that owns the cluster's folder; empty for a folder of
// before owners, or none.
func (l *Backend) ownerOf(c layout.Cluster) string { return readMark(l.layout.OwnerFile, c) }

// folderKeyOf is the hash of the key the cluster's folder is marked with, or "".
func (l *Backend) folderKeyOf(c layout.Cluster) string { return readMark(l.layout.FolderKeyFile, c) }

// readMark reads a one-line mark of a cluster's folder, "" when it has none.
func readMark(file func(layout.Cluster) (string, error), c layout.Cluster) string {
	path, err := file(c)
	if err != nil {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// refuseElsewhere is the error for touching anything of a folder another server or
// namespace owns, or nil when it is the calling worker's (or of before owners).
func (l *Backend) refuseElsewhere(c layout.Cluster) error {
	if owner := l.ownerOf(c); owner != "" && l.Owner != "" && owner != l.Owner {
		return &backend.OwnedElsewhereError{Key: c.Key(), Owner: owner}
	}
	return nil
}
