package cli

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// localBackend keeps members under data, reads secret references from secretsDir, and
// starts this very binary as their agent when none is running.
func localBackend(data, secretsDir string, com common) (*backend.Local, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the clusterflow binary to start the agent with: %w", err)
	}
	local, err := backend.NewLocal(data, self, "agent", "--log-format", com.logFormat, "--log-level", com.logLevel, "--dir")
	if err != nil {
		return nil, err
	}
	if secretsDir != "" {
		if local.SecretsDir, err = filepath.Abs(secretsDir); err != nil {
			return nil, err
		}
	}
	return local, nil
}

// scriptUsers sets who runs scripts instead of the worker's user: one user (--script-user)
// or a user per cluster (--script-uids FIRST-LAST). Either needs a root worker and a data
// folder other users may pass through (o+x on it and every folder above), since sandboxes
// live there.
func scriptUsers(local *backend.Local, name, uids, data string) error {
	if name != "" && uids != "" {
		return apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: give one or the other")
	}
	if name == "" && uids == "" {
		return nil
	}
	if os.Geteuid() != 0 {
		return apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: starting scripts as another user needs the worker to run as root")
	}
	if err := traversable(data); err != nil {
		return err
	}
	if uids != "" {
		first, last, ok := strings.Cut(uids, "-")
		f, err1 := strconv.ParseUint(first, 10, 32)
		l, err2 := strconv.ParseUint(last, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return apperr.Errorf(apperr.Invalid, "--script-uids %q: want FIRST-LAST, such as 61000-61999", uids)
		}
		if err := local.UseScriptUIDs(uint32(f), uint32(l)); err != nil {
			return apperr.Errorf(apperr.Invalid, "--script-uids: %v", err)
		}
		return nil
	}
	var err error
	local.ScriptUser, err = scriptUser(name)
	return err
}

// traversable checks that other users may pass through data and every folder above it.
func traversable(data string) error {
	abs, err := filepath.Abs(data)
	if err != nil {
		return err
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o001 == 0 {
			return apperr.Errorf(apperr.Invalid, "script users: %s (mode %04o) does not let other users through to the sandboxes under --data %s; chmod o+x it", dir, info.Mode().Perm(), data)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// scriptUser looks up --script-user, which must not be root.
func scriptUser(name string) (*runner.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: uid %q and gid %q are not numbers", name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: is root; name an unprivileged user", name)
	}
	return &runner.User{UID: uint32(uid), GID: uint32(gid)}, nil
}
