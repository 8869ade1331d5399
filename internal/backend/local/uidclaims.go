package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
)

// uidClaimsDir is where the workers of every data folder on the machine claim the script
// users they hand out, one file per number naming the map that holds it. Each data folder
// has a map of its own (several hosts of one `dev`, or workers with separate --data), and
// a number two maps held would be one user for two clusters, and the removal of one would
// kill the other's processes. A claim naming a map that no longer holds the number (its
// folder deleted, say) is stale and taken over.
var uidClaimsDir = "/var/lib/clusterflow/.script-uid-claims"

// claim takes uid for this map, machine-wide, and says whether it is this map's: false
// when another map holds it.
func (r *UIDRange) claim(uid uint32) (bool, error) {
	mine := false
	err := withClaims(func() error {
		file := filepath.Join(uidClaimsDir, strconv.FormatUint(uint64(uid), 10))
		if holder, err := os.ReadFile(file); err == nil && string(holder) != r.file && (fresh(file) || mapHolds(string(holder), uid)) {
			return nil
		}
		mine = true
		return atomicfile.Write(file, []byte(r.file), 0o600)
	})
	return mine, err
}

// unclaim drops this map's claim on uid.
func (r *UIDRange) unclaim(uid uint32) error {
	return withClaims(func() error {
		file := filepath.Join(uidClaimsDir, strconv.FormatUint(uint64(uid), 10))
		if holder, err := os.ReadFile(file); err == nil && string(holder) == r.file {
			return os.Remove(file)
		}
		return nil
	})
}

// withClaims runs fn under the claims' lock, which every data folder's worker shares.
func withClaims(fn func() error) error {
	if err := os.MkdirAll(uidClaimsDir, 0o700); err != nil {
		return fmt.Errorf("script user claims: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(uidClaimsDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("script user claims: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock the script user claims: %w", err)
	}
	return fn()
}

// fresh says the claim was made within the last minute: its map may not be saved yet.
func fresh(file string) bool {
	info, err := os.Stat(file)
	return err == nil && time.Since(info.ModTime()) < time.Minute
}

// mapHolds says whether the map file gives uid to a cluster.
func mapHolds(file string, uid uint32) bool {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true // unreadable is not proof that it let go
	}
	var byCluster map[string]uint32
	if json.Unmarshal(data, &byCluster) != nil {
		return true
	}
	for _, held := range byCluster {
		if held == uid {
			return true
		}
	}
	return false
}
