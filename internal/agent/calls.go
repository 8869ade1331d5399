package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
)

// The host's backend lives in its agent, the one part of a host that may act as other users
// (see deploy/systemd): a worker, which holds the Temporal credentials and talks to the
// network, reaches members only through these calls, so it needs no privilege over them.

// HostBackend is the host's backend as the agent serves it to workers.
type HostBackend interface {
	// For is the backend as this worker sees it: its namespace owns what it makes, its
	// host name and address are what scripts are told, its connection completes their
	// activities.
	For(Worker) backend.Backend
	// UseLauncher hands the backend the agent, which starts and stops its script runs.
	UseLauncher(Launcher)
}

// Launcher starts and stops script runs: the agent itself, in its own process, or a Client
// of one.
type Launcher interface {
	Launch(ctx context.Context, l Launch) (Reply, error)
	Stop(ctx context.Context, s Stop) (Reply, error)
}

// The methods of a Call, one for each of backend.Backend's but MemberAddress, which is
// derived (see RemoteBackend.MemberAddress).
const (
	callWriteClusterFiles = "writeClusterFiles"
	callCreateMember      = "createMember"
	callRemoveMember      = "removeMember"
	callRemoveCluster     = "removeCluster"
	callListMembers       = "listMembers"
	callListClusters      = "listClusters"
	callSignedSpecs       = "signedSpecs"
	callSignedMark        = "signedMark"
	callAssignPorts       = "assignPorts"
	callLaunchScript      = "launchScript"
	callStopScript        = "stopScript"
	callReadLog           = "readLog"
	callLaunchProgress    = "launchProgress"
	callRecheckMember     = "recheckMember"
	callDescribeMember    = "describeMember"
	// callStatus asks what the agent is and looks after (Status): no backend's method, so
	// an agent that holds no backend answers it too.
	callStatus = "status"
)

// launchArgs are LaunchScript's arguments.
type launchArgs struct {
	Run backend.ScriptRun  `json:"run"`
	To  backend.Completion `json:"to"`
}

// none is the result of a method that answers nothing but its error.
type none struct{}

// call runs a worker's call on the host's backend.
func (a *Agent) call(ctx context.Context, c Call) (any, error) {
	if c.Method == callStatus {
		return a.status(), nil
	}
	if a.opts.Host == nil {
		return nil, &RefusedError{Reason: "this agent holds no backend; it takes launches only"}
	}
	b := a.opts.Host.For(c.Worker)
	switch c.Method {
	case callWriteClusterFiles:
		return with(c.Args, func(files backend.ClusterFiles) (none, error) { return none{}, b.WriteClusterFiles(ctx, files) })
	case callCreateMember:
		return with(c.Args, func(m backend.MemberRef) (none, error) { return none{}, b.CreateMember(ctx, m) })
	case callRemoveMember:
		return with(c.Args, func(m backend.MemberRef) (none, error) {
			// Only once the backend found the member the caller's: another namespace's
			// worker stops no probe.
			err := b.RemoveMember(ctx, m)
			if err == nil {
				a.dropProbe(probeID(m.Cluster, m.Home, m.Name), "member removed")
			}
			return none{}, err
		})
	case callRecheckMember:
		return with(c.Args, func(m backend.MemberRef) (none, error) {
			if r, ok := b.(backend.Rechecker); ok {
				return none{}, r.RecheckMember(ctx, m)
			}
			return none{}, nil
		})
	case callRemoveCluster:
		return with(c.Args, func(key string) (none, error) {
			a.dropProbes(func(rec probeRecord) bool { return backend.ClusterRef{Name: rec.Cluster, Home: rec.Home}.Key() == key }, "cluster removed")
			return none{}, b.RemoveCluster(ctx, key)
		})
	case callListMembers:
		return with(c.Args, func(key string) ([]backend.MemberRef, error) { return b.ListMembers(ctx, key) })
	case callListClusters:
		return b.ListClusters(ctx)
	case callSignedSpecs:
		return with(c.Args, func(cluster backend.ClusterRef) ([]signing.Signed, error) { return b.SignedSpecs(ctx, cluster) })
	case callSignedMark:
		return with(c.Args, func(name string) (time.Time, error) { return b.SignedMark(ctx, name) })
	case callAssignPorts:
		return with(c.Args, func(req backend.PortRequest) (backend.PortAssignment, error) { return b.AssignPorts(ctx, req) })
	case callLaunchScript:
		return with(c.Args, func(l launchArgs) (none, error) { return none{}, b.LaunchScript(ctx, l.Run, l.To) })
	case callStopScript:
		return with(c.Args, func(s backend.ScriptStop) (none, error) { return none{}, b.StopScript(ctx, s) })
	case callReadLog:
		return with(c.Args, func(req backend.LogRequest) (backend.LogChunk, error) { return b.ReadLog(ctx, req) })
	case callDescribeMember:
		return with(c.Args, func(m backend.MemberRef) (backend.MemberDescription, error) {
			if d, ok := b.(backend.Describer); ok {
				return d.DescribeMember(ctx, m)
			}
			return backend.MemberDescription{}, errors.New("this host's backend does not describe its members")
		})
	case callLaunchProgress:
		return with(c.Args, func(m backend.MemberRef) (string, error) {
			if w, ok := b.(backend.LaunchWatcher); ok {
				return w.LaunchProgress(ctx, m)
			}
			return "", nil
		})
	}
	return nil, &RefusedError{Reason: fmt.Sprintf("unknown backend call %q", c.Method)}
}

// with decodes a call's arguments and runs do on them.
func with[A, R any](args json.RawMessage, do func(A) (R, error)) (any, error) {
	var a A
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, &RefusedError{Reason: fmt.Sprintf("bad arguments: %v", err)}
	}
	return do(a)
}

// Launch starts a run in this agent's own process, as a Client's Launch does through its
// socket: the host's backend, which the agent holds, launches through it.
func (a *Agent) Launch(_ context.Context, l Launch) (Reply, error) {
	l.Protocol = Protocol
	action, err := a.launch(l)
	if err != nil {
		return Reply{Protocol: Protocol, Error: err.Error()}, err
	}
	return Reply{Protocol: Protocol, Action: action}, nil
}

// Stop stops runs in this agent's own process, as a Client's Stop does.
func (a *Agent) Stop(_ context.Context, s Stop) (Reply, error) {
	return Reply{Protocol: Protocol, Action: fmt.Sprintf("stopped %d", a.stop(s))}, nil
}

// RemoteBackend is a worker's backend: every call goes to the agent of its host, which
// holds the real one (HostBackend).
type RemoteBackend struct {
	Client *Client
	// Worker is sent with every call; SecretEnv is filled in per launch.
	Worker Worker
	// AddressOf is the backend's MemberAddress, derived where the worker is, since it is
	// asked for without a context (nil: a member is reached at its host's address).
	AddressOf func(m backend.MemberRef, hostAddress string) string
}

var (
	_ backend.Backend       = (*RemoteBackend)(nil)
	_ backend.LaunchWatcher = (*RemoteBackend)(nil)
)

func (r *RemoteBackend) do(ctx context.Context, method string, args, result any) error {
	return r.doAs(ctx, r.Worker, method, args, result)
}

func (r *RemoteBackend) doAs(ctx context.Context, w Worker, method string, args, result any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	reply, err := r.Client.Call(ctx, Call{Method: method, Worker: w, Args: raw})
	if err != nil {
		return err
	}
	if result == nil || len(reply.Result) == 0 {
		return nil
	}
	return json.Unmarshal(reply.Result, result)
}

func (r *RemoteBackend) WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error {
	return r.do(ctx, callWriteClusterFiles, files, nil)
}

func (r *RemoteBackend) CreateMember(ctx context.Context, m backend.MemberRef) error {
	return r.do(ctx, callCreateMember, m, nil)
}

func (r *RemoteBackend) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	return r.do(ctx, callRemoveMember, m, nil)
}

func (r *RemoteBackend) RemoveCluster(ctx context.Context, key string) error {
	return r.do(ctx, callRemoveCluster, key, nil)
}

func (r *RemoteBackend) ListMembers(ctx context.Context, key string) ([]backend.MemberRef, error) {
	var members []backend.MemberRef
	return members, r.do(ctx, callListMembers, key, &members)
}

func (r *RemoteBackend) ListClusters(ctx context.Context) ([]backend.HeldCluster, error) {
	var clusters []backend.HeldCluster
	return clusters, r.do(ctx, callListClusters, nil, &clusters)
}

func (r *RemoteBackend) SignedSpecs(ctx context.Context, c backend.ClusterRef) ([]signing.Signed, error) {
	var signed []signing.Signed
	return signed, r.do(ctx, callSignedSpecs, c, &signed)
}

func (r *RemoteBackend) SignedMark(ctx context.Context, name string) (time.Time, error) {
	var mark time.Time
	return mark, r.do(ctx, callSignedMark, name, &mark)
}

func (r *RemoteBackend) AssignPorts(ctx context.Context, req backend.PortRequest) (backend.PortAssignment, error) {
	var ports backend.PortAssignment
	return ports, r.do(ctx, callAssignPorts, req, &ports)
}

// LaunchScript sends, with the launch, the worker's secret variables its cluster may name.
func (r *RemoteBackend) LaunchScript(ctx context.Context, run backend.ScriptRun, to backend.Completion) error {
	w := r.Worker
	w.SecretEnv = SecretEnvOf(run.Member.Cluster, os.Environ())
	return r.doAs(ctx, w, callLaunchScript, launchArgs{Run: run, To: to}, nil)
}

func (r *RemoteBackend) StopScript(ctx context.Context, s backend.ScriptStop) error {
	return r.do(ctx, callStopScript, s, nil)
}

func (r *RemoteBackend) ReadLog(ctx context.Context, req backend.LogRequest) (backend.LogChunk, error) {
	var chunk backend.LogChunk
	return chunk, r.do(ctx, callReadLog, req, &chunk)
}

// DescribeMember implements backend.Describer.
func (r *RemoteBackend) DescribeMember(ctx context.Context, m backend.MemberRef) (backend.MemberDescription, error) {
	var d backend.MemberDescription
	return d, r.do(ctx, callDescribeMember, m, &d)
}

// RecheckMember implements backend.Rechecker.
func (r *RemoteBackend) RecheckMember(ctx context.Context, m backend.MemberRef) error {
	return r.do(ctx, callRecheckMember, m, nil)
}

// LaunchProgress implements backend.LaunchWatcher: the agent's backend knows, if any does.
func (r *RemoteBackend) LaunchProgress(ctx context.Context, m backend.MemberRef) (string, error) {
	var progress string
	return progress, r.do(ctx, callLaunchProgress, m, &progress)
}

// AgentStatus is what the host's agent is and looks after now.
func (r *RemoteBackend) AgentStatus(ctx context.Context) (Status, error) {
	var status Status
	return status, r.do(ctx, callStatus, none{}, &status)
}

// AgentVersion implements backend.AgentReporter.
func (r *RemoteBackend) AgentVersion(ctx context.Context) (string, error) {
	status, err := r.AgentStatus(ctx)
	return status.Version, err
}

// MemberAddress implements backend.Backend.
func (r *RemoteBackend) MemberAddress(m backend.MemberRef, hostAddress string) string {
	if r.AddressOf == nil {
		return hostAddress
	}
	return r.AddressOf(m, hostAddress)
}

// KeepAgentAlive restarts the agent whenever it is down while runs need it, when this
// worker starts its agent itself.
func (r *RemoteBackend) KeepAgentAlive(ctx context.Context) { r.Client.KeepAlive(ctx, keepAliveEvery) }

// AgentPID is the PID of the agent, if one answers.
func (r *RemoteBackend) AgentPID() (int, bool) { return r.Client.PID() }

// SecretEnvOf picks, of environ (NAME=value lines), the variables a cluster may name in
// {fromEnv: N}: those spec.SecretEnvName gives for it, by N.
func SecretEnvOf(cluster string, environ []string) map[string]string {
	prefix := spec.SecretEnvName(cluster, "")
	var out map[string]string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		n, mine := strings.CutPrefix(name, prefix)
		if !ok || !mine || spec.CheckSecretEnv(n) != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[n] = value
	}
	return out
}

// replyError puts err in the reply, its kind with it.
func replyError(reply *Reply, err error) {
	var refused *RefusedError
	reply.Error, reply.Refused, reply.Fault = err.Error(), errors.As(err, &refused), backend.FaultOf(err)
}
