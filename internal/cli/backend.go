package cli

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

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

// scriptUserFlags say who runs startscripts on a worker that runs as root: by default a
// user per cluster from DefaultScriptUIDs, never root itself unless allowed.
type scriptUserFlags struct {
	user, uids string
	allowRoot  bool
}

// DefaultScriptUIDs are the users a root worker gives clusters when told nothing else.
const DefaultScriptUIDs = "61000-61999"

// allowRootScriptsEnv stands for --allow-root-scripts, for whoever starts workers in bulk.
const allowRootScriptsEnv = "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS"

// register adds the flags; dev, a developer's own, lets root run scripts as root unless
// asked otherwise, where a worker of a fleet does not.
func (f *scriptUserFlags) register(fs *pflag.FlagSet, forDev bool) {
	fs.StringVar(&f.uids, "script-uids", "", "as root, run each cluster's startscripts as a user of its own from FIRST-LAST (default "+DefaultScriptUIDs+"); no cluster reaches another's files")
	fs.StringVar(&f.user, "script-user", "", "as root, run every startscript as this one unprivileged user instead")
	allow, usage := os.Getenv(allowRootScriptsEnv) == "1", "as root, run startscripts as root too (default $"+allowRootScriptsEnv+"=1); never needed otherwise"
	if forDev {
		allow, usage = true, "as root, run startscripts as root too, unless --script-uids or --script-user says otherwise"
	}
	fs.BoolVar(&f.allowRoot, "allow-root-scripts", allow, usage)
}

// apply sets who runs the backend's scripts. As root, that is a user per cluster unless
// another user or root itself is asked for; as anyone else, that user, since only root
// may start processes as others. Script users need the data folder, and every folder
// above it, to let other users through (o+x), since their sandboxes live there.
func (f *scriptUserFlags) apply(local *backend.Local, data string, logger *zap.Logger) error {
	switch {
	case f.user != "" && f.uids != "":
		return apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: give one or the other")
	case (f.user != "" || f.uids != "") && os.Geteuid() != 0:
		return apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: starting scripts as another user needs the worker to run as root")
	case os.Geteuid() != 0:
		return nil // scripts run as this unprivileged user
	case f.allowRoot && f.user == "" && f.uids == "": // a user asked for outranks the allowance
		logger.Warn("Startscripts run as root, as this worker does (--allow-root-scripts): any cluster's script can act as the host")
		return nil
	}
	if err := traversable(data); err != nil {
		return err
	}
	if f.user != "" {
		var err error
		local.ScriptUser, err = scriptUser(f.user)
		return err
	}
	uids := f.uids
	if uids == "" {
		uids = DefaultScriptUIDs
	}
	first, last, ok := strings.Cut(uids, "-")
	lo, err1 := strconv.ParseUint(first, 10, 32)
	hi, err2 := strconv.ParseUint(last, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return apperr.Errorf(apperr.Invalid, "--script-uids %q: want FIRST-LAST, such as %s", uids, DefaultScriptUIDs)
	}
	if err := local.UseScriptUIDs(uint32(lo), uint32(hi)); err != nil {
		return apperr.Errorf(apperr.Invalid, "--script-uids: %v", err)
	}
	return nil
}

// traversable checks that other users may pass through data and every folder above it.
func traversable(data string) error {
	abs, err := filepath.Abs(data)
	if err != nil {
		return err
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o001 == 0 {
			return apperr.Errorf(apperr.Invalid, "this worker runs as root, so its startscripts run as users of their own, and %s (mode %04o) does not let them through to their sandboxes under --data %s: chmod o+x it, or run scripts as root with --allow-root-scripts", dir, info.Mode().Perm(), data)
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
