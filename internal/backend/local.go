package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/spec"
)

// Local keeps each member in a sandbox folder, <Root>/clusters/<cluster>/<member>/, and runs
// its startscripts there through the host's agent, which keeps its own state in
// <Root>/agent/.
type Local struct {
	root  string
	agent *agent.Client
	// Grace is how long a script has between SIGTERM and SIGKILL when stopped.
	Grace time.Duration
	// Host names the host the backend runs on, for scripts (CLUSTERFLOW_HOST).
	Host string
}

// NewLocal returns a local backend keeping its data under root. agentCommand starts the
// agent when none is running; its last argument is followed by the agent's folder.
func NewLocal(root string, agentCommand ...string) (*Local, error) {
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
	return &Local{root: abs, agent: &agent.Client{Dir: agentDir, Command: command}, Grace: 10 * time.Second}, nil
}

// AgentDir is the folder of the agent serving a local backend rooted at root.
func AgentDir(root string) string { return filepath.Join(root, "agent") }

// AgentPID returns the process ID of the running agent, if there is one.
func (l *Local) AgentPID() (int, bool) { return l.agent.PID() }

// KeepAgentAlive restarts the agent whenever it is down while runs still need it, until
// ctx ends.
func (l *Local) KeepAgentAlive(ctx context.Context) { l.agent.KeepAlive(ctx, 2*time.Second) }

// hostName is the host scripts are told they run on: "local" in single-host mode.
func (l *Local) hostName() string {
	if l.Host == "" {
		return "local"
	}
	return l.Host
}

// MemberDirEnv names the variable holding a member's sandbox; the local backend also uses it
// to find processes a member left behind.
const MemberDirEnv = "CLUSTERFLOW_MEMBER_DIR"

// WriteClusterFiles implements Backend.
func (l *Local) WriteClusterFiles(_ context.Context, files ClusterFiles) error {
	dir, err := l.clusterDir(files.Cluster)
	if err != nil {
		return err
	}
	for _, hash := range slices.Sorted(maps.Keys(files.Scripts)) {
		path, err := l.scriptPath(files.Cluster, hash)
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
	meta := files.ConfigMeta
	meta.Members = slices.Clone(meta.Members)
	for i, node := range meta.Members {
		if memberDir, err := l.memberDir(Member{Cluster: files.Cluster, Role: node.Role, Name: node.Name}); err == nil {
			meta.Members[i].Dir = memberDir
		}
	}
	data, err := meta.Encode()
	if err != nil {
		return err
	}
	return atomicfile.Write(l.configMetaPath(dir), data, 0o644)
}

// CreateMember implements Backend.
func (l *Local) CreateMember(_ context.Context, m Member) error {
	dir, err := l.memberDir(m)
	if err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
}

// LaunchScript implements Backend.
func (l *Local) LaunchScript(ctx context.Context, run ScriptRun, to Completion) error {
	dir, err := l.memberDir(run.Member)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("member %s has no sandbox at %s: %w", run.Member.Name, dir, err)
	}
	args, err := scriptArgs(run)
	if err != nil {
		return err
	}
	script, err := l.scriptPath(run.Member.Cluster, run.ScriptHash)
	if err != nil {
		return err
	}
	path, args, err := interpreter(script, args)
	if err != nil {
		return err
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	clusterDir, _ := l.clusterDir(run.Member.Cluster)
	_, err = l.agent.Launch(ctx, agent.Launch{
		Key: to.Key, TaskToken: to.TaskToken, Connection: to.Connection, HeartbeatTimeout: to.HeartbeatTimeout,
		Member: run.Member.Name, Event: string(run.Event),
		Script: agent.Script{
			Path: path, Args: args, Dir: dir,
			Env: scriptEnv(run, map[string]string{
				"CLUSTERFLOW_CLUSTER":    run.Member.Cluster,
				"CLUSTERFLOW_ROLE":       run.Member.Role,
				"CLUSTERFLOW_MEMBER":     run.Member.Name,
				MemberDirEnv:             dir,
				"CLUSTERFLOW_EVENT":      string(run.Event),
				"CLUSTERFLOW_CONFIGMETA": l.configMetaPath(clusterDir),
				"CLUSTERFLOW_HOST":       l.hostName(),
				"HOME":                   dir,
			}),
			StdoutFile: filepath.Join(logs, string(run.Event)+".stdout"),
			StderrFile: filepath.Join(logs, string(run.Event)+".stderr"),
		},
		Timeout:   run.Timeout,
		Grace:     l.Grace,
		RecordDir: filepath.Join(dir, ".clusterflow", "runs"),
	})
	return err
}

// RemoveMember implements Backend.
func (l *Local) RemoveMember(_ context.Context, m Member) error {
	dir, err := l.memberDir(m)
	if err != nil {
		return err
	}
	runner.KillTagged(MemberDirEnv + "=" + dir)
	return os.RemoveAll(dir)
}

// RemoveCluster implements Backend.
func (l *Local) RemoveCluster(_ context.Context, cluster string) error {
	dir, err := l.clusterDir(cluster)
	if err != nil {
		return err
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		runner.KillTagged(MemberDirEnv + "=" + filepath.Join(dir, e.Name()))
	}
	return os.RemoveAll(dir)
}

// ListMembers implements Backend: every folder in the cluster's folder whose name has a
// member's shape, <cluster>-<role>-<ordinal>.
func (l *Local) ListMembers(_ context.Context, cluster string) ([]Member, error) {
	dir, err := l.clusterDir(cluster)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var members []Member
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if role, _, ok := spec.ParseMemberName(cluster, e.Name()); ok {
			members = append(members, Member{Cluster: cluster, Role: role, Name: e.Name()})
		}
	}
	return members, nil
}

func (l *Local) clusterDir(cluster string) (string, error) {
	if err := spec.CheckName(cluster); err != nil {
		return "", fmt.Errorf("cluster name %w", err)
	}
	return filepath.Join(l.root, "clusters", cluster), nil
}

// memberDir checks every name before it becomes part of a path.
func (l *Local) memberDir(m Member) (string, error) {
	clusterDir, err := l.clusterDir(m.Cluster)
	if err != nil {
		return "", err
	}
	if err := spec.CheckName(m.Role); err != nil {
		return "", fmt.Errorf("role name %w", err)
	}
	if err := spec.CheckName(m.Name); err != nil || !strings.HasPrefix(m.Name, m.Cluster+"-"+m.Role+"-") {
		return "", fmt.Errorf("member name %q is not <cluster>-<role>-<ordinal> for cluster %q, role %q", m.Name, m.Cluster, m.Role)
	}
	return filepath.Join(clusterDir, m.Name), nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (l *Local) scriptPath(cluster, hash string) (string, error) {
	dir, err := l.clusterDir(cluster)
	if err != nil {
		return "", err
	}
	if !sha256Hex.MatchString(hash) {
		return "", fmt.Errorf("script hash %q is not a SHA-256", hash)
	}
	// Member names cannot start with '.', so this folder never collides with a member.
	return filepath.Join(dir, ".clusterflow", "scripts", hash), nil
}

func (l *Local) configMetaPath(clusterDir string) string {
	return filepath.Join(clusterDir, ".clusterflow", "configmeta.json")
}

// scriptArgs builds the KubeDirector-style arguments for an event.
func scriptArgs(run ScriptRun) ([]string, error) {
	switch run.Event {
	case spec.EventConfigure:
		return []string{"--configure"}, nil
	case spec.EventTeardown:
		return []string{"--teardown"}, nil
	case spec.EventStart:
		return []string{"--start"}, nil
	case spec.EventAddNodes, spec.EventDelNodes:
		if err := spec.CheckName(run.NodesRole); err != nil {
			return nil, fmt.Errorf("%s role %w", run.Event, err)
		}
		if len(run.Nodes) == 0 {
			return nil, fmt.Errorf("%s needs at least one node", run.Event)
		}
		for _, n := range run.Nodes {
			if err := spec.CheckName(n); err != nil {
				return nil, fmt.Errorf("%s node %w", run.Event, err)
			}
		}
		return []string{"--" + string(run.Event), "--role", run.NodesRole, "--nodes", strings.Join(run.Nodes, ",")}, nil
	}
	return nil, fmt.Errorf("unknown event %q", run.Event)
}

// interpreter runs scripts with a #! line directly and others with /bin/sh.
func interpreter(script string, args []string) (string, []string, error) {
	f, err := os.Open(script)
	if err != nil {
		return "", nil, fmt.Errorf("startscript not installed: %w", err)
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	if bytes.Equal(head[:n], []byte("#!")) {
		return script, args, nil
	}
	return "/bin/sh", append([]string{script}, args...), nil
}

// passedThrough are the worker's variables a script inherits; anything else (credentials
// such as TEMPORAL_API_KEY in particular) stays out of app scripts.
var passedThrough = []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL"}

func scriptEnv(run ScriptRun, own map[string]string) []string {
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

// ListClusters lists the clusters with a folder here, whoever made them.
func (l *Local) ListClusters(_ context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(l.root, "clusters"))
	if err != nil {
		return nil, err
	}
	var clusters []string
	for _, e := range entries {
		if e.IsDir() && spec.CheckName(e.Name()) == nil {
			clusters = append(clusters, e.Name())
		}
	}
	return clusters, nil
}
