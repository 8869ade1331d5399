package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
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
