package cli

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

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

// scriptUser resolves --script-user: who scripts run as instead of the worker's user. It
// needs a root worker, a user that is not root, and a data folder that user may pass
// through (o+x on it and every folder above), since its sandboxes live there.
func scriptUser(name, data string) (*runner.User, error) {
	if name == "" {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: starting scripts as another user needs the worker to run as root", name)
	}
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
	abs, err := filepath.Abs(data)
	if err != nil {
		return nil, err
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o001 == 0 {
			return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: %s (mode %04o) does not let other users through to the sandboxes under --data %s; chmod o+x it", name, dir, info.Mode().Perm(), data)
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return &runner.User{UID: uint32(uid), GID: uint32(gid)}, nil
}
