package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// Backend keeps each member in a sandbox folder, <Root>/clusters/<cluster>@<home>/<member>/
// (see layout), and runs its startscripts there through the host's agent, which keeps its
// own state in <Root>/agent/. It lives in the agent (agent.HostBackend), which workers call;
// the fields from Host to Connection are those of the worker calling (For).
type Backend struct {
	root   string
	layout layout.Root
	// launcher starts and stops runs: the agent this backend lives in, or a client of one
	// (agent), the one New makes.
	launcher agent.Launcher
	agent    *agent.Client
	// removedLogs serializes keeping removed members' logs; a pointer, so that the copies
	// For makes for each calling worker share it.
	removedLogs *sync.Mutex
	// Grace is how long a script has between SIGTERM and SIGKILL when stopped.
	Grace time.Duration
	// Host names the host the backend runs on, for scripts (CLUSTERFLOW_HOST), and Address
	// is the address it registered, which its members are reached at (CLUSTERFLOW_ADDRESS);
	// empty in single-host mode, where members are reached at 127.0.0.1.
	Host, Address string
	// Namespace is the name of the Temporal namespace the worker serves, which names its
	// folder of secret files; SecretEnv are the worker's variables a launch's cluster may
	// name (agent.Worker.SecretEnv).
	Namespace string
	SecretEnv map[string]string
	// SecretsDir holds each cluster's secret files, in a folder named after the cluster.
	SecretsDir string
	// ScriptUser, when set, is who scripts run as, never the worker's user (which is then
	// root): each sandbox is theirs, mode 0700, and the agent's folder is out of their reach.
	ScriptUser *runner.User
	// ScriptUIDs, when set, gives each cluster a user of its own instead (see userOf), and
	// its folder to that user's group only (0750): one cluster's scripts reach no other's.
	ScriptUIDs *UIDRange
	// Owner is the ID of the Temporal namespace the worker serves, unique across servers:
	// the folders it writes are marked its own, and it removes no folder another owns.
	Owner string
	// Connection is how the agent reaches Temporal to heartbeat and complete the script
	// activities it is handed.
	Connection agent.Connection
	// Ports is where members' ports come from (AssignPorts); zero: DefaultPortRange.
	Ports PortRange
	// MemberResources bound each member whose role sets no resources of its own (zero
	// fields: unbounded).
	MemberResources runner.Resources
	// Log is the agent's log (nil: none).
	Log *zap.Logger
	// AddressOf, when set, is how members are reached instead of at their host's address:
	// a backend that gives each member an address of its own (internal/backend/docker)
	// keeps the local backend's folders and says so here.
	AddressOf func(m backend.MemberRef, hostAddress string) string
}

func (l *Backend) log() *zap.Logger {
	if l.Log == nil {
		return zap.NewNop()
	}
	return l.Log
}

var _ backend.Backend = (*Backend)(nil)

// New returns a local backend keeping its data under root. agentCommand starts the
// agent when none is running; its last argument is followed by the agent's folder.
func New(root string, agentCommand ...string) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, "clusters"), 0o755); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	agentDir := AgentDir(abs)
	var command []string
	if len(agentCommand) > 0 {
		command = append(slices.Clone(agentCommand), agentDir)
	}
	client := &agent.Client{Dir: agentDir, Command: command}
	return &Backend{root: abs, layout: layout.Root(abs), launcher: client, agent: client, Grace: 10 * time.Second, removedLogs: &sync.Mutex{}}, nil
}

var _ agent.HostBackend = (*Backend)(nil)

// UseLauncher implements agent.HostBackend: the agent the backend lives in runs its scripts.
func (l *Backend) UseLauncher(launcher agent.Launcher) { l.launcher = launcher }

// For implements agent.HostBackend: the backend as the worker calling sees it.
func (l *Backend) For(w agent.Worker) backend.Backend {
	c := *l
	c.Owner, c.Namespace, c.Host, c.Address, c.Connection, c.SecretEnv = w.Owner, w.Namespace, w.Host, w.Address, w.Connection, w.SecretEnv
	return &c
}

// AgentDir is the folder of the agent serving a local backend rooted at root.
func AgentDir(root string) string { return layout.Root(root).Agent() }

// AgentPID returns the process ID of the running agent, if there is one.
func (l *Backend) AgentPID() (int, bool) { return l.agent.PID() }

// KeepAgentAlive restarts the agent whenever it is down while runs still need it, until
// ctx ends.
func (l *Backend) KeepAgentAlive(ctx context.Context) { l.agent.KeepAlive(ctx, 2*time.Second) }

// hostName is the host scripts are told they run on: "local" in single-host mode.
// hostAddress is where the host's members are reached, as configmeta says.
func (l *Backend) hostAddress() string {
	if l.Address == "" {
		return "127.0.0.1"
	}
	return l.Address
}

func (l *Backend) hostName() string {
	if l.Host == "" {
		return "local"
	}
	return l.Host
}

// MemberDirEnv names the variable holding a member's sandbox; the local backend also uses it
// to find processes a member left behind.
const MemberDirEnv = "CLUSTERFLOW_MEMBER_DIR"

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

// CreateMember implements Backend.
func (l *Backend) CreateMember(_ context.Context, m backend.MemberRef) error {
	dir, err := l.memberDir(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sandbox, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer sandbox.Close()
	if err := sandbox.MkdirAll(layout.LogsDir, 0o755); err != nil {
		return err
	}
	if err := l.claim(m.Folder(), filepath.Dir(dir), ""); err != nil {
		return err
	}
	u, err := l.userOf(m.Folder())
	if err != nil || u == nil {
		return err
	}
	if err := l.ownClusterDir(m.Folder(), filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return giveTo(u, sandbox, ".", layout.LogsDir)
}

// LaunchScript implements Backend.
func (l *Backend) LaunchScript(ctx context.Context, run backend.ScriptRun, to backend.Completion) error {
	dir, err := l.memberDir(run.Member)
	if err != nil {
		return err
	}
	resources, err := l.resources(run)
	if err != nil {
		return err
	}
	if run.Event == spec.EventConfigure {
		if err := l.CreateMember(ctx, run.Member); err != nil {
			return fmt.Errorf("create member %s: %w", run.Member.Name, err)
		}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &backend.NoSandboxError{Member: run.Member.Name, Dir: dir}
	} else if err != nil {
		return fmt.Errorf("member %s's sandbox at %s: %w", run.Member.Name, dir, err)
	}
	if err := l.refuseElsewhere(run.Member.Folder()); err != nil {
		return err
	}
	if run, err = l.resolve(run); err != nil {
		return err
	}
	user, err := l.userOf(run.Member.Folder())
	if err != nil {
		return err
	}
	sandbox, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer sandbox.Close()
	if err := ownSandbox(user, sandbox); err != nil {
		return fmt.Errorf("give the sandbox %s to its script user: %w", dir, err)
	}
	own := map[string]string{
		"CLUSTERFLOW_CLUSTER": run.Member.Cluster,
		"CLUSTERFLOW_ROLE":    run.Member.Role,
		"CLUSTERFLOW_MEMBER":  run.Member.Name,
		MemberDirEnv:          dir,
		"CLUSTERFLOW_EVENT":   string(run.Event),
		"CLUSTERFLOW_HOST":    l.hostName(),
		"CLUSTERFLOW_ADDRESS": l.MemberAddress(run.Member, l.hostAddress()),
		"HOME":                dir,
		"USER":                userName(user, l.ScriptUIDs != nil),
	}
	own["LOGNAME"] = own["USER"]
	if run.Revision > 0 {
		own["CLUSTERFLOW_REVISION"] = strconv.Itoa(run.Revision)
	}
	if run.Reason != "" {
		own["CLUSTERFLOW_REASON"] = run.Reason
	}
	if run.Joining {
		own["CLUSTERFLOW_JOINING"] = "1"
	}
	if run.Replaces != "" {
		own["CLUSTERFLOW_REPLACES"] = run.Replaces
	}
	if run.Bootstrap {
		own["CLUSTERFLOW_BOOTSTRAP"] = "1"
	}
	for name, port := range run.Ports {
		own[spec.PortEnv(name)] = strconv.Itoa(port)
	}
	args, err := scriptArgs(run)
	if err != nil {
		return err
	}
	if len(run.Nodes) > 0 {
		// Written through the sandbox's root: its user may have put a link where it goes.
		nodesFile := layout.NodesFile(string(run.Event))
		if err := atomicfile.WriteIn(sandbox, nodesFile, []byte(strings.Join(run.Nodes, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("write the nodes of %s: %w", run.Event, err)
		}
		if err := giveTo(user, sandbox, filepath.Dir(nodesFile), nodesFile); err != nil {
			return err
		}
		own[NodesFileEnv] = filepath.Join(dir, nodesFile)
		if len(args[len(args)-1]) > MaxNodesArg {
			args = append(args[:len(args)-2], "--nodes-file", own[NodesFileEnv])
		}
	}
	// The agent finds the script, the sandbox and the files of the run by these names
	// alone: the script must be installed, and the folders of the output files and of
	// clusterflow's own (where the agent makes the exit file's) the script user's.
	script, err := l.layout.Script(run.Member.Folder(), run.ScriptHash)
	if err != nil {
		return err
	}
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("startscript not installed: %w", err)
	}
	for _, folder := range []string{layout.LogsDir, layout.StateDir} {
		if err := sandbox.MkdirAll(folder, 0o755); err != nil {
			return err
		}
	}
	if err := giveTo(user, sandbox, layout.LogsDir, layout.StateDir); err != nil {
		return err
	}
	clusterDir, _ := l.layout.Cluster(run.Member.Folder())
	own["CLUSTERFLOW_CONFIGMETA"] = l.configMetaPath(clusterDir)
	if own["TMPDIR"], err = l.clusterTmp(run.Member.Folder(), user); err != nil {
		return fmt.Errorf("make the cluster's temporary folder: %w", err)
	}
	limits := run.Limits.OrDefaults()
	scriptOf := func(args []string, own map[string]string) agent.Script {
		return agent.Script{SHA256: run.ScriptHash, Args: args, Env: scriptEnv(run, own), User: user, Limits: runner.Limits{
			Processes: limits.Processes, OpenFiles: limits.OpenFiles, Output: int64(limits.OutputMiB) << 20,
		}, Resources: resources}
	}
	_, err = l.launcher.Launch(ctx, agent.Launch{
		Key:       agent.Key{WorkflowID: to.WorkflowID, ActivityID: to.ActivityID},
		TaskToken: to.TaskToken, Connection: l.Connection, HeartbeatTimeout: to.HeartbeatTimeout,
		Cluster: run.Member.Cluster, Home: run.Member.Home, Member: run.Member.Name, Event: string(run.Event),
		Script:  scriptOf(args, own),
		Timeout: run.Timeout,
		Grace:   l.Grace,
		Probe:   l.probe(run, own, scriptOf),
	})
	var refused *agent.RefusedError
	if errors.As(err, &refused) {
		return &backend.RefusedError{Reason: refused.Reason}
	}
	return err
}

// probe is how the member's host checks it once the run succeeds: its script with --check,
// in the run's environment but for what only the run's event means.
func (l *Backend) probe(run backend.ScriptRun, own map[string]string, script func([]string, map[string]string) agent.Script) *agent.Probe {
	if run.Probe == nil {
		return nil
	}
	check := maps.Clone(own)
	check["CLUSTERFLOW_EVENT"] = string(spec.EventCheck)
	for _, k := range []string{"CLUSTERFLOW_REASON", "CLUSTERFLOW_JOINING", "CLUSTERFLOW_REPLACES", "CLUSTERFLOW_BOOTSTRAP", NodesFileEnv} {
		delete(check, k)
	}
	return &agent.Probe{Probe: *run.Probe, Script: script([]string{"--check"}, check), Host: l.Host}
}

// clusterTmp makes the cluster's temporary folder if need be, its script user's, mode 0700.
func (l *Backend) clusterTmp(c layout.Cluster, u *runner.User) (string, error) {
	dir, err := l.layout.Tmp(c)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if u != nil {
		// Its parent is the agent's, so the name is the folder made here, not a link.
		if err := os.Lchown(dir, int(u.UID), int(u.GID)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// MemberAddress implements Backend: a member is reached at its host's address, unless
// AddressOf says otherwise.
func (l *Backend) MemberAddress(m backend.MemberRef, hostAddress string) string {
	if l.AddressOf != nil {
		return l.AddressOf(m, hostAddress)
	}
	return hostAddress
}

// NodesFileEnv names the file listing an addnodes' or delnodes' nodes, one a line.
const NodesFileEnv = "CLUSTERFLOW_NODES_FILE"

// MaxNodesArg is the longest --nodes argument; past it a script gets --nodes-file instead.
// Linux refuses a single argument over 128 KiB (and all of them over 2 MiB).
const MaxNodesArg = 64 << 10

// resolve fills in what a run names rather than carries: the role's env from its hash, and
// the member's nodes from the notice. A run from before either carries them itself.
func (l *Backend) resolve(run backend.ScriptRun) (backend.ScriptRun, error) {
	if run.EnvHash != "" {
		env, err := l.readEnv(run.Member.Folder(), run.EnvHash)
		if err != nil {
			return run, err
		}
		run.Env = env
	}
	env, err := l.fillSecrets(run.Member.Cluster, run.Env)
	if err != nil {
		return run, err
	}
	run.Env = env
	if run.Notice > 0 {
		if !run.Event.Notifies() {
			return run, fmt.Errorf("%s names notice %d, which only addnodes, delnodes and removing tell", run.Event, run.Notice)
		}
		n, err := l.readNotice(run.Member.Folder(), run.Notice)
		if err != nil {
			return run, err
		}
		if n.Event != run.Event {
			return run, fmt.Errorf("notice %d is a %s, not a %s", n.ID, n.Event, run.Event)
		}
		var knows notice.Knowledge
		if run.Knows != nil {
			knows = *run.Knows
		}
		run.NodesRole, run.Nodes = n.Role, n.About(run.Member.Name, knows)
	}
	return run, nil
}

// StopScript implements Backend, through the host's agent.
func (l *Backend) StopScript(ctx context.Context, stop backend.ScriptStop) error {
	if _, err := l.memberDir(stop.Member); err != nil {
		return err
	}
	if err := l.refuseElsewhere(stop.Member.Folder()); err != nil {
		return err
	}
	_, err := l.launcher.Stop(ctx, agent.Stop{WorkflowID: stop.WorkflowID, Member: stop.Member.Name, Event: string(stop.Event)})
	return err
}

// RecheckMember implements backend.Rechecker through the agent that checks the member.
func (l *Backend) RecheckMember(_ context.Context, m backend.MemberRef) error {
	if err := l.refuseElsewhere(m.Folder()); err != nil {
		return err
	}
	if r, ok := l.launcher.(agent.Rechecker); ok {
		r.Recheck(m.Cluster, m.Home, m.Name)
	}
	return nil
}

// RemoveMember implements Backend.
func (l *Backend) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	dir, err := l.memberDir(m)
	if err != nil {
		return err
	}
	if err := l.refuseElsewhere(m.Folder()); err != nil {
		return err
	}
	runner.KillTagged(MemberDirEnv + "=" + dir)
	cgroup := runner.MemberCgroup(l.root, m.Folder().Key(), m.Name)
	if err := runner.KillCgroup(cgroup, 10*time.Second); err != nil {
		return err
	}
	if err := runner.RemoveBounds(cgroup); err != nil {
		return err
	}
	records, err := l.layout.Records(m.Folder(), m.Name)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(records); err != nil {
		return err
	}
	if err := l.keepRemovedLogs(m, dir); err != nil {
		return err
	}
	if err := l.releasePorts(m.Folder(), m.Name); err != nil {
		return fmt.Errorf("free %s's ports: %w", m.Name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// The cluster's last member here: nothing of its user may run on.
	if left, err := l.ListMembers(ctx, m.Folder().Key()); err == nil && len(left) == 0 {
		if err := runner.KillCgroup(runner.ClusterCgroup(l.root, m.Folder().Key()), 10*time.Second); err != nil {
			return err
		}
		return l.killClusterUser(m.Folder())
	}
	return nil
}

// RemoveCluster implements Backend. A folder another server or namespace owns is never
// removed (see claim), nor, by RemoveMember, anything in it.
func (l *Backend) RemoveCluster(_ context.Context, key string) error {
	c, err := backend.ParseKey(key)
	if err != nil {
		return err
	}
	dir, err := l.layout.Cluster(c)
	if err != nil {
		return err
	}
	if err := l.refuseElsewhere(c); err != nil {
		return err
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		runner.KillTagged(MemberDirEnv + "=" + filepath.Join(dir, e.Name()))
	}
	if err := runner.KillCgroup(runner.ClusterCgroup(l.root, c.Key()), 10*time.Second); err != nil {
		return err
	}
	if err := runner.RemoveBounds(runner.ClusterCgroup(l.root, c.Key())); err != nil {
		return err
	}
	if err := l.killClusterUser(c); err != nil {
		return err
	}
	if err := l.releaseClusterPorts(c); err != nil {
		return fmt.Errorf("free the ports of cluster %s: %w", c.Name, err)
	}
	records, err := l.layout.ClusterRecords(c)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(records); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if l.ScriptUIDs != nil {
		return l.ScriptUIDs.release(c)
	}
	return nil
}

// killClusterUser ends every process of the cluster's own user, when clusters have users
// of their own and this one has been given one.
func (l *Backend) killClusterUser(c layout.Cluster) error {
	if l.ScriptUIDs == nil {
		return nil
	}
	uid, ok, err := l.ScriptUIDs.lookup(c)
	if err != nil || !ok {
		return err
	}
	// A number another data folder holds too (both given out before claims) is not this
	// folder's alone to kill.
	if mine, err := l.ScriptUIDs.claim(uid); err != nil || !mine {
		return err
	}
	return killUser(c, uid)
}

// ListMembers implements Backend: every folder in the cluster's folder whose name has a
// member's shape, <cluster>-<role>-<ordinal>.
func (l *Backend) ListMembers(_ context.Context, key string) ([]backend.MemberRef, error) {
	c, err := backend.ParseKey(key)
	if err != nil {
		return nil, err
	}
	dir, err := l.layout.Cluster(c)
	if err != nil {
		return nil, err
	}
	if err := l.refuseElsewhere(c); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var members []backend.MemberRef
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if role, _, ok := spec.ParseMemberName(c.Name, e.Name()); ok {
			members = append(members, backend.MemberRef{Cluster: c.Name, Home: c.Home, Role: role, Name: e.Name()})
		}
	}
	return members, nil
}

// Sandbox is the member's folder on the host, its names checked.
func (l *Backend) Sandbox(m backend.MemberRef) (string, error) { return l.memberDir(m) }

// FilesDir is the folder of the cluster's own files on the host: its startscripts, envs,
// notices and configmeta.
func (l *Backend) FilesDir(c backend.ClusterRef) (string, error) {
	dir, err := l.layout.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Dir(l.configMetaPath(dir)), nil
}

// ScriptUserOf is who the cluster's scripts run as (nil: the agent's own user).
func (l *Backend) ScriptUserOf(c backend.ClusterRef) (*runner.User, error) { return l.userOf(c) }

// ScriptUIDRange is the range clusters are given users of their own from, if they are.
func (l *Backend) ScriptUIDRange() (first, last uint32, ok bool) {
	if l.ScriptUIDs == nil {
		return 0, 0, false
	}
	return l.ScriptUIDs.First, l.ScriptUIDs.Last, true
}

// RefuseElsewhere refuses, with an *OwnedElsewhereError, a cluster another server or
// namespace owns on this host.
func (l *Backend) RefuseElsewhere(c backend.ClusterRef) error { return l.refuseElsewhere(c) }

// memberDir checks every name before it becomes part of a path.
func (l *Backend) memberDir(m backend.MemberRef) (string, error) {
	if err := spec.CheckName(m.Role); err != nil {
		return "", fmt.Errorf("role name %w", err)
	}
	if role, _, ok := spec.ParseMemberName(m.Cluster, m.Name); !ok || role != m.Role {
		return "", fmt.Errorf("member name %q is not <cluster>-<role>-<ordinal> for cluster %q, role %q", m.Name, m.Cluster, m.Role)
	}
	return l.layout.Sandbox(m.Folder(), m.Name)
}

func (l *Backend) configMetaPath(clusterDir string) string {
	return filepath.Join(clusterDir, ".clusterflow", "configmeta.json")
}

// scriptArgs builds the KubeDirector-style arguments for an event.
func scriptArgs(run backend.ScriptRun) ([]string, error) {
	switch run.Event {
	case spec.EventConfigure:
		return []string{"--configure"}, nil
	case spec.EventTeardown:
		return []string{"--teardown"}, nil
	case spec.EventStart:
		return []string{"--start"}, nil
	case spec.EventRestart:
		return []string{"--restart"}, nil
	case spec.EventDecommission:
		return []string{"--decommission"}, nil
	case spec.EventUpgrade:
		if run.FromRevision < 1 || run.Revision < 1 {
			return nil, fmt.Errorf("upgrade needs the revisions it goes from and to, got %d and %d", run.FromRevision, run.Revision)
		}
		return []string{"--upgrade", "--from-revision", strconv.Itoa(run.FromRevision), "--to-revision", strconv.Itoa(run.Revision)}, nil
	case spec.EventAddNodes, spec.EventDelNodes, spec.EventRemoving:
		if err := spec.CheckName(run.NodesRole); err != nil {
			return nil, fmt.Errorf("%s role %w", run.Event, err)
		}
		if len(run.Nodes) == 0 {
			return nil, fmt.Errorf("%s needs at least one node", run.Event)
		}
		for _, n := range run.Nodes {
			if err := spec.CheckMemberName(n); err != nil {
				return nil, fmt.Errorf("%s node %w", run.Event, err)
			}
		}
		return []string{"--" + string(run.Event), "--role", run.NodesRole, "--nodes", strings.Join(run.Nodes, ",")}, nil
	}
	if run.Action != "" && string(run.Event) == run.Action {
		if err := spec.CheckActionCall(run.Action, run.Params); err != nil {
			return nil, err
		}
		args := []string{"--action", run.Action}
		for _, p := range run.Params {
			args = append(args, "--param", p)
		}
		return args, nil
	}
	return nil, fmt.Errorf("unknown event %q", run.Event)
}

// passedThrough are the worker's variables a script inherits; anything else (credentials
// such as TEMPORAL_API_KEY in particular) stays out of app scripts.
var passedThrough = []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL"}

func scriptEnv(run backend.ScriptRun, own map[string]string) []string {
	env := map[string]string{}
	for _, k := range passedThrough {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range run.Env {
		env[k] = v
	}
	for k, v := range own {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// ListClusters implements Backend: the clusters with a folder here that are the calling
// worker's namespace's (or of before owners). Another namespace's are not listed at all:
// their homes, which their folders are named by, are theirs to know.
func (l *Backend) ListClusters(_ context.Context) ([]backend.HeldCluster, error) {
	entries, err := os.ReadDir(l.layout.Clusters())
	if err != nil {
		return nil, err
	}
	var clusters []backend.HeldCluster
	for _, e := range entries {
		if c, err := backend.ParseKey(e.Name()); e.IsDir() && err == nil && l.refuseElsewhere(c) == nil {
			clusters = append(clusters, backend.HeldCluster{ClusterRef: c})
		}
	}
	return clusters, nil
}
