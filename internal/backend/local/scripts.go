package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// A member's script runs: what a launch gives its script (arguments, environment, the
// probe its host checks it with), and stopping and rechecking them, through the agent.

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
