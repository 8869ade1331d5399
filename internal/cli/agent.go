package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend/local"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// runAgent serves a host: its backend (members' folders, their users, ports and secrets)
// and the startscripts it runs. A worker starts one for its --data as its own user, or the
// host runs it as a service of its own, as root beside an unprivileged worker
// (deploy/systemd/clusterflow-agent.service), which reaches it at --socket.
func runAgent(ctx context.Context, args []string) error {
	// Before anything: what it starts inherits it.
	if err := runner.NoNewPrivileges(); err != nil {
		return fmt.Errorf("set no_new_privs, which every startscript inherits: %w", err)
	}
	preferSmallHeap()
	fs := newFlagSet("agent", "[--data DIR] [flags]")
	var com common
	com.register(fs, "info")
	fs.Lookup("task-queue").Hidden = true // the agent polls no task queue
	var hf hostFlags
	hf.register(fs, false)
	dir := fs.String("dir", "", "the agent's own folder (default DATA/agent)")
	socket := fs.String("socket", "", "listen here (default DIR/agent.sock)")
	workerUser := fs.String("worker-user", "", "also take calls from this user's workers (a name or a number), whose group may then reach --socket: the unprivileged worker of a root agent")
	idle := fs.Duration("idle-exit", 10*time.Minute, "exit after having nothing to do for this long (0: never)")
	heartbeat := fs.Duration("heartbeat", 2*time.Second, "how often running scripts report progress to Temporal")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *heartbeat <= 0 || *heartbeat > 2*time.Second {
		return apperr.Errorf(apperr.Invalid, "--heartbeat %s: must be more than 0 and at most 2s", *heartbeat)
	}
	logger, err := com.logger()
	if err != nil {
		return err
	}
	settings, err := hf.settings(logger)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = local.AgentDir(settings.Data)
	}
	opts := agent.Options{Dir: *dir, Socket: *socket, Logger: logger, HeartbeatEvery: *heartbeat, IdleExit: *idle, Settings: settings.digest()}
	if *workerUser != "" {
		uid, gid, err := lookupUser(*workerUser)
		if err != nil {
			return apperr.Errorf(apperr.Invalid, "--worker-user: %v", err)
		}
		opts.Workers, opts.SocketGroup = []int{uid}, gid
	}
	if opts.Host, err = settings.openHost(logger); err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	if settings.Backend == "docker" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the clusterflow binary to enter containers with: %w", err)
		}
		opts.EnterCommand = []string{self, "container-exec"}
	}
	err = agent.Serve(ctx, opts)
	if errors.Is(err, agent.ErrAlreadyRunning) {
		logger.Info("An agent already serves this folder; leaving it to that one")
		return nil
	}
	return err
}

// lookupUser reads a user's name or number: a number need not be in the user database.
func lookupUser(name string) (uid, gid int, err error) {
	if n, err := strconv.Atoi(name); err == nil {
		if u, err := user.LookupId(name); err == nil {
			g, _ := strconv.Atoi(u.Gid)
			return n, g, nil
		}
		return n, n, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return 0, 0, errors.New("its uid and gid are not numbers")
	}
	return uid, gid, nil
}
