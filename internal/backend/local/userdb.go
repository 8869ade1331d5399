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

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// A cluster's script user is a user of the system, not a bare number: it has a name,
// resolved by getpwuid inside its scripts (PostgreSQL's initdb, Erlang, anything that asks
// who it is refuses to run otherwise), through systemd's userdb drop-in records, which
// glibc reads through nss-systemd (Debian's libnss-systemd, "systemd" in nsswitch.conf's
// passwd and group lines). They live in /run (gone at a reboot, written again at the next
// run), one record a user and group, and go with the cluster's user.

// userdbDir is where the records go: systemd's runtime drop-in folder.
var userdbDir = "/run/userdb"

// ScriptUserName is the name of a cluster's script user of that number.
func ScriptUserName(uid uint32) string { return "clusterflow-" + strconv.FormatUint(uint64(uid), 10) }

// userRecords writes and removes the userdb records of the script users.
type userRecords struct {
	mu      sync.Mutex
	written map[uint32]bool
	warned  bool
}

type userRecord struct {
	UserName      string `json:"userName"`
	UID           uint32 `json:"uid"`
	GID           uint32 `json:"gid"`
	RealName      string `json:"realName"`
	HomeDirectory string `json:"homeDirectory"`
	Shell         string `json:"shell"`
	Disposition   string `json:"disposition"`
	Locked        bool   `json:"locked"`
}

type groupRecord struct {
	GroupName   string `json:"groupName"`
	GID         uint32 `json:"gid"`
	Disposition string `json:"disposition"`
}

// ensure writes u's records for cluster c, once per agent. A host that cannot (no
// /run/userdb of root's) runs scripts all the same, under a user without a name, and says
// so once.
func (r *userRecords) ensure(c layout.Cluster, u *runner.User, home string, warn func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written[u.UID] {
		return
	}
	if err := writeUserRecords(c, u, home); err != nil {
		if !r.warned {
			r.warned = true
			warn(err)
		}
		return
	}
	if r.written == nil {
		r.written = map[uint32]bool{}
	}
	r.written[u.UID] = true
}

func writeUserRecords(c layout.Cluster, u *runner.User, home string) error {
	if err := os.MkdirAll(userdbDir, 0o755); err != nil {
		return err
	}
	name := ScriptUserName(u.UID)
	usr, _ := json.Marshal(userRecord{UserName: name, UID: u.UID, GID: u.GID, RealName: "clusterflow cluster " + c.Key(),
		HomeDirectory: home, Shell: "/usr/sbin/nologin", Disposition: "dynamic", Locked: true})
	group, _ := json.Marshal(groupRecord{GroupName: name, GID: u.GID, Disposition: "dynamic"})
	for _, rec := range []struct {
		file string
		data []byte
		link string
	}{
		{name + ".user", usr, strconv.FormatUint(uint64(u.UID), 10) + ".user"},
		{name + ".group", group, strconv.FormatUint(uint64(u.GID), 10) + ".group"},
	} {
		if err := atomicfile.Write(filepath.Join(userdbDir, rec.file), rec.data, 0o644); err != nil {
			return err
		}
		link := filepath.Join(userdbDir, rec.link)
		if target, err := os.Readlink(link); err == nil && target == rec.file {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(rec.file, link); err != nil {
			return err
		}
	}
	return nil
}

// remove drops u's records, when the cluster's user goes.
func (r *userRecords) remove(uid uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, uid)
	name, number := ScriptUserName(uid), strconv.FormatUint(uint64(uid), 10)
	for _, f := range []string{name + ".user", name + ".group", number + ".user", number + ".group"} {
		if err := os.Remove(filepath.Join(userdbDir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the script user's record: %w", err)
		}
	}
	return nil
}

// userName is the name scripts run as u are told (USER, LOGNAME): its record's for a
// cluster's user, the system's for another, the number itself when it has none.
func userName(u *runner.User, perCluster bool) string {
	uid := uint32(os.Getuid())
	if u != nil {
		uid = u.UID
	}
	if u != nil && perCluster {
		return ScriptUserName(uid)
	}
	if name, ok := systemNames.Load(uid); ok {
		return name.(string)
	}
	name := strconv.FormatUint(uint64(uid), 10)
	if found, err := user.LookupId(name); err == nil {
		name = found.Username
	}
	systemNames.Store(uid, name)
	return name
}

// systemNames caches the names of the users scripts run as that are not clusters' own:
// one lookup each, not one a launch.
var systemNames sync.Map
