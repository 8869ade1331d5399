package workflows_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
)

// fakeBackend records what the workflows ask of members, in order, and plays scripted
// outcomes. It stands in for real processes in the workflow unit tests.
type fakeBackend struct {
	mu       sync.Mutex
	nextPort int
	calls    []string
	running  map[string]int // role -> scripts running now
	peak     map[string]int // role -> most scripts running at once
	// runningAll and peakAll count across roles.
	runningAll, peakAll int
	// outcome decides a run's result; nil means success.
	outcome func(ctx context.Context, run backend.ScriptRun) runner.Result
	delay   time.Duration
	files   []backend.ClusterFiles
	// notices and envs are what the files installed, as a host keeps them.
	notices map[int]notice.Notice
	envs    map[string]map[string]string
	// members are the sandboxes created and not removed, by name.
	members map[string]backend.MemberRef
	// listed, if set, sees each listing before ListMembers returns it: it can hold the
	// listing back, as a slow host does.
	listed func(members []backend.MemberRef)
	// listers and writers count the listings and the writes of files by the type of
	// workflow that asked for them.
	listers, writers map[string]int
	// writing, if set, sees each write of files first: it can hold it back, as a slow host
	// does, or fail it.
	writing func(ctx context.Context) error
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{running: map[string]int{}, peak: map[string]int{}, members: map[string]backend.MemberRef{},
		notices: map[int]notice.Notice{}, envs: map[string]map[string]string{}}
}

func (f *fakeBackend) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeBackend) WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error {
	if err := files.Unpack(); err != nil {
		return err
	}
	if f.writing != nil {
		if err := f.writing(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if activity.IsActivity(ctx) {
		countBy(&f.writers, activity.GetInfo(ctx).WorkflowType.Name)
	}
	f.files = append(f.files, files)
	if files.Notice != nil {
		f.notices[files.Notice.ID] = *files.Notice
	}
	maps.Copy(f.envs, files.Envs)
	return nil
}

// countBy counts one more of key in counts, made on first use.
func countBy(counts *map[string]int, key string) {
	if *counts == nil {
		*counts = map[string]int{}
	}
	(*counts)[key]++
}

// resolve fills in what a run names, as a host does: its env and its nodes.
func (f *fakeBackend) resolve(run backend.ScriptRun) (backend.ScriptRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if run.EnvHash != "" {
		env, ok := f.envs[run.EnvHash]
		if !ok {
			return run, fmt.Errorf("env %s is not installed", run.EnvHash)
		}
		run.Env = env
	}
	if run.Notice > 0 {
		n, ok := f.notices[run.Notice]
		if !ok {
			return run, fmt.Errorf("notice %d is not written", run.Notice)
		}
		run.NodesRole, run.Nodes = n.Role, n.About(run.Member.Name, *run.Knows)
	}
	return run, nil
}

func (f *fakeBackend) CreateMember(ctx context.Context, m backend.MemberRef) error {
	f.record("create %s%s", m.Name, onHost(ctx))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[sandboxKey(ctx, m.Name)] = m
	return nil
}

// sandboxKey names a sandbox by its host ("" in single-host mode) and member, as the
// hosts of a fleet keep sandboxes apart.
func sandboxKey(ctx context.Context, member string) string {
	return strings.TrimPrefix(onHost(ctx), "@") + "/" + member
}

func (f *fakeBackend) ListMembers(ctx context.Context, key string) ([]backend.MemberRef, error) {
	cluster, _, _ := strings.Cut(key, "@") // the fake keeps one cluster of a name
	f.mu.Lock()
	var members []backend.MemberRef
	host := strings.TrimPrefix(onHost(ctx), "@") + "/"
	for _, key := range slices.Sorted(maps.Keys(f.members)) {
		if m := f.members[key]; m.Cluster == cluster && strings.HasPrefix(key, host) {
			members = append(members, m)
		}
	}
	if activity.IsActivity(ctx) {
		countBy(&f.listers, activity.GetInfo(ctx).WorkflowType.Name)
	}
	listed := f.listed
	f.mu.Unlock()
	if listed != nil {
		listed(members)
	}
	return members, nil
}

// filesWritten counts the cluster files written: one per level of a deploy.
func (f *fakeBackend) filesWritten() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.files)
}

// setSandbox adds or loses a member's sandbox behind the workflow's back.
func (f *fakeBackend) setSandbox(m backend.MemberRef, present bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if present {
		f.members[m.Host+"/"+m.Name] = m
	} else {
		delete(f.members, m.Host+"/"+m.Name)
	}
}

// StopScript records the stop; the fake's runs end on their activity's cancel.
func (f *fakeBackend) StopScript(ctx context.Context, stop backend.ScriptStop) error {
	f.record("stop %s %s%s", stop.Event, stop.Member.Name, onHost(ctx))
	return nil
}

// LaunchScript is not used: RunStartscript below stands in for the launch and the agent.
func (f *fakeBackend) LaunchScript(context.Context, backend.ScriptRun, backend.Completion) error {
	return fmt.Errorf("the fake backend runs scripts in RunStartscript")
}

// RunStartscript replaces the activity of the same name: it plays the outcome synchronously
// and fails the way the agent would, so the workflow logic is tested without the agent.
func (f *fakeBackend) RunStartscript(ctx context.Context, run backend.ScriptRun) (backend.ScriptResult, error) {
	run, err := f.resolve(run)
	if err != nil {
		return backend.ScriptResult{}, err
	}
	if run.Event == spec.EventConfigure {
		_ = f.CreateMember(ctx, run.Member) // as the real activity does
	}
	f.mu.Lock()
	f.running[run.Member.Role]++
	f.peak[run.Member.Role] = max(f.peak[run.Member.Role], f.running[run.Member.Role])
	f.runningAll++
	f.peakAll = max(f.peakAll, f.runningAll)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[run.Member.Role]--
		f.runningAll--
		f.mu.Unlock()
	}()
	f.record("%s %s%s%s", run.Event, run.Member.Name, onHost(ctx), nodes(run))
	time.Sleep(f.delay)
	res := runner.Result{Outcome: runner.Exited}
	if f.outcome != nil {
		res = f.outcome(ctx, run)
	}
	if res.Outcome == runner.Canceled {
		return seamResult(res), ctx.Err()
	}
	return seamResult(res), agent.ResultError(string(run.Event), run.Timeout, res)
}

// seamResult is the agent's result as the workflows read it.
func seamResult(r runner.Result) backend.ScriptResult {
	return backend.ScriptResult{Outcome: backend.Outcome(r.Outcome), ExitCode: r.ExitCode, Duration: r.Duration, StdoutTail: r.StdoutTail, StderrTail: r.StderrTail}
}

// The fake holds no files, signatures or output, and lists no clusters.
func (f *fakeBackend) ListClusters(context.Context) ([]backend.HeldCluster, error) { return nil, nil }
func (f *fakeBackend) SignedSpecs(context.Context, backend.ClusterRef) ([]signing.Signed, error) {
	return nil, nil
}
func (f *fakeBackend) SignedMark(context.Context, string) (time.Time, error) { return time.Time{}, nil }
func (f *fakeBackend) MemberAddress(_ backend.MemberRef, hostAddress string) string {
	return hostAddress
}
func (f *fakeBackend) ReadLog(context.Context, backend.LogRequest) (backend.LogChunk, error) {
	return backend.LogChunk{Missing: true}, nil
}

func (f *fakeBackend) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	f.record("remove %s%s", m.Name, onHost(ctx))
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.members, sandboxKey(ctx, m.Name))
	return nil
}

func (f *fakeBackend) RemoveCluster(_ context.Context, key string) error {
	cluster, _, _ := strings.Cut(key, "@")
	f.record("remove cluster %s", cluster)
	return nil
}

func (f *fakeBackend) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// onHost is "@HOST" for an activity on a host's task queue, as the calls record it; "" in
// single-host mode.
func onHost(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	if _, host, ok := strings.Cut(activity.GetInfo(ctx).TaskQueue, "@"); ok {
		return "@" + host
	}
	return ""
}

// nodes writes a run's nodes as the calls record them; a long list by its ends and count,
// so that thousands of members each told of a thousand nodes do not fill the memory.
func nodes(run backend.ScriptRun) string {
	switch n := len(run.Nodes); {
	case n == 0:
		return ""
	case n > 8:
		return fmt.Sprintf(" %s=[%s … %s](%d)", run.NodesRole, run.Nodes[0], run.Nodes[n-1], n)
	}
	return fmt.Sprintf(" %s=%v", run.NodesRole, run.Nodes)
}

var _ backend.Backend = (*fakeBackend)(nil)

// AssignPorts gives each member's ports from 30000 on, in the order asked: enough for the
// workflow tests, which check what the workflow does with them.
func (f *fakeBackend) AssignPorts(_ context.Context, req backend.PortRequest) (backend.PortAssignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := backend.PortAssignment{}
	for _, ask := range req.Members {
		out[ask.Member] = map[string]int{}
		for _, name := range ask.Names {
			f.nextPort++
			out[ask.Member][name] = 30000 + f.nextPort
		}
	}
	return out, nil
}
