package local

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testlimit"
	"github.com/clusterflow/clusterflow/spec"
)

// scriptHash is the SHA-256 of the script newLocal installed, which the agent checks
// before it runs it. The tests of this package run one at a time.
var scriptHash string

func newLocal(t *testing.T, script string) *Backend {
	t.Helper()
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.Connection = agent.Connection{ClientConfigProfile: envconfig.ClientConfigProfile{Address: "127.0.0.1:1"}}
	// An in-process agent runs the scripts. No Temporal answers at its address, so it keeps
	// results on disk, where runScript reads them.
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, agent.Options{Dir: AgentDir(l.root)}) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	testlimit.Poll(t, "the agent to answer", 10*time.Second, l.agent.Running)
	scriptHash = fmt.Sprintf("%x", sha256.Sum256([]byte(script)))
	err = l.WriteClusterFiles(context.Background(), backend.ClusterFiles{
		Cluster: "c",
		Scripts: map[string]string{scriptHash: script},
		ConfigMeta: backend.ConfigMeta{Cluster: "c", Roles: []backend.ConfigMetaRole{{Name: "w", DependsOn: []string{}, Members: []string{"c-w-0"}}},
			Members: []backend.ConfigMetaNode{{Name: "c-w-0", Role: "w", State: "pending"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRunScriptGivesTheScriptItsSandboxAndEnvironment(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "secret")
	l := newLocal(t, "#!/bin/sh\necho \"$@\"; env | sort; pwd -P\n")
	m := backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-0"}
	if err := l.CreateMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	res := runScript(t, l, backend.ScriptRun{
		Member: m, Event: spec.EventAddNodes, NodesRole: "w", Nodes: []string{"c-w-1", "c-w-2"},
		ScriptHash: scriptHash, Env: map[string]string{"APP": "x"}, Timeout: time.Minute,
	})
	dir, _ := l.memberDir(m)
	realDir, _ := filepath.EvalSymlinks(dir)
	for _, want := range []string{
		"--addnodes --role w --nodes c-w-1,c-w-2\n", "APP=x\n", "CLUSTERFLOW_CLUSTER=c\n", "CLUSTERFLOW_ROLE=w\n",
		"CLUSTERFLOW_MEMBER=c-w-0\n", "CLUSTERFLOW_EVENT=addnodes\n", "CLUSTERFLOW_MEMBER_DIR=" + dir + "\n", "\n" + realDir + "\n",
	} {
		if !strings.Contains(res.StdoutTail, want) {
			t.Errorf("script output lacks %q:\n%s", want, res.StdoutTail)
		}
	}
	if strings.Contains(res.StdoutTail, "TEMPORAL_API_KEY") {
		t.Error("the worker's Temporal credentials leaked into the script's environment")
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "addnodes.stdout")); err != nil {
		t.Errorf("stdout not kept in the sandbox: %v", err)
	}
	// The run's record is the agent's, out of the sandbox, and goes with the member.
	if _, err := os.Stat(filepath.Join(dir, ".clusterflow", "runs")); !os.IsNotExist(err) {
		t.Errorf("run records in the member's sandbox (%v)", err)
	}
	if _, err := os.Stat(records(t, l, m)); err != nil {
		t.Errorf("no run record in the agent's folder: %v", err)
	}
	if err := l.RemoveMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(records(t, l, m)); !os.IsNotExist(err) {
		t.Errorf("the member's run records outlived it (%v)", err)
	}
}

func TestScriptsWithoutShebangRunWithSh(t *testing.T) {
	l := newLocal(t, "echo plain sh\n")
	m := backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-0"}
	_ = l.CreateMember(context.Background(), m)
	res := runScript(t, l, backend.ScriptRun{Member: m, Event: spec.EventConfigure, ScriptHash: scriptHash, Timeout: time.Minute})
	if res.ExitCode != 0 || res.StdoutTail != "plain sh\n" {
		t.Fatalf("%+v", res)
	}
}

func TestNamesCannotEscapeTheDataFolder(t *testing.T) {
	l := newLocal(t, "#!/bin/sh\n")
	bad := []backend.MemberRef{
		{Cluster: "..", Role: "w", Name: "c-w-0"},
		{Cluster: "c", Role: "../w", Name: "c-w-0"},
		{Cluster: "c", Role: "w", Name: "../../etc"},
		{Cluster: "c", Role: "w", Name: "c-other-0"},
	}
	for _, m := range bad {
		if err := l.CreateMember(context.Background(), m); err == nil {
			t.Errorf("CreateMember accepted %+v", m)
		}
		if err := l.RemoveMember(context.Background(), m); err == nil {
			t.Errorf("RemoveMember accepted %+v", m)
		}
	}
	m := backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-0"}
	_ = l.CreateMember(context.Background(), m)
	for _, run := range []backend.ScriptRun{
		{Member: m, Event: "reboot", ScriptHash: scriptHash},
		{Member: m, Event: spec.EventAddNodes, NodesRole: "w", Nodes: []string{"x; rm -rf /"}, ScriptHash: scriptHash},
		{Member: m, Event: spec.EventConfigure, ScriptHash: "../../bin/sh"},
	} {
		if err := l.LaunchScript(context.Background(), run, completion(run)); err == nil {
			t.Errorf("LaunchScript accepted %+v", run)
		}
	}
}

func TestConfigMetaHasOneMemberPerLine(t *testing.T) {
	l := newLocal(t, "#!/bin/sh\n")
	data, err := os.ReadFile(filepath.Join(l.root, "clusters", "c", ".clusterflow", "configmeta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta backend.ConfigMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatalf("configmeta is not JSON: %v\n%s", err, data)
	}
	dir, _ := l.memberDir(backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-0"})
	if len(meta.Members) != 1 || meta.Members[0].Dir != dir {
		t.Errorf("members %+v", meta.Members)
	}
	line := `{"name":"c-w-0","role":"w","ordinal":0,"state":"pending","dir":"` + dir + `"}`
	if !strings.Contains(string(data), "\n  "+line) {
		t.Errorf("member not on a line of its own:\n%s", data)
	}
}

func TestRemoveMemberStopsWhatTheMemberLeftRunning(t *testing.T) {
	l := newLocal(t, "#!/bin/sh\nsleep 60 > /dev/null 2>&1 &\necho $! > daemon.pid\n")
	m := backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-0"}
	_ = l.CreateMember(context.Background(), m)
	runScript(t, l, backend.ScriptRun{Member: m, Event: spec.EventConfigure, ScriptHash: scriptHash, Timeout: time.Minute})
	dir, _ := l.memberDir(m)
	pidText, err := os.ReadFile(filepath.Join(dir, "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(pidText))
	if err := l.RemoveMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox still there: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s still running after RemoveMember", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// completion names a run uniquely; nothing listens for its result.
func completion(run backend.ScriptRun) backend.Completion {
	return backend.Completion{
		WorkflowID: "test/" + run.Member.Name, ActivityID: fmt.Sprintf("%s-%d", run.Event, run.Notice),
		TaskToken: []byte("token"),
	}
}

// runScript launches the run through the agent and waits for the result it records.
func runScript(t *testing.T, l *Backend, run backend.ScriptRun) runner.Result {
	t.Helper()
	to := completion(run)
	if err := l.LaunchScript(context.Background(), run, to); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(records(t, l, run.Member), agent.Key{WorkflowID: to.WorkflowID, ActivityID: to.ActivityID}.ID(), "record.json")
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var rec struct{ Result *runner.Result }
		if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &rec) == nil && rec.Result != nil {
			return *rec.Result
		}
	}
	t.Fatalf("no result recorded at %s", path)
	return runner.Result{}
}

func TestListMembersFindsEverySandboxShapedLikeAMember(t *testing.T) {
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if members, err := l.ListMembers(ctx, "c"); err != nil || len(members) != 0 {
		t.Fatalf("a cluster with no folder: %v, %v", members, err)
	}
	for _, m := range []backend.MemberRef{{Cluster: "c", Role: "w", Name: "c-w-0"}, {Cluster: "c", Role: "edge-gw", Name: "c-edge-gw-12"}} {
		if err := l.CreateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Made behind clusterflow's back: one shaped like a member, and folders and files that
	// are not members.
	clusterDir := filepath.Join(l.root, "clusters", "c")
	for _, dir := range []string{"c-rogue-3", ".clusterflow", "c-w-x", "c-w-01", "other-w-0", "c-w"} {
		if err := os.MkdirAll(filepath.Join(clusterDir, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(clusterDir, "c-w-7"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	members, err := l.ListMembers(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.Role+":"+m.Name)
	}
	if want := "edge-gw:c-edge-gw-12 rogue:c-rogue-3 w:c-w-0"; strings.Join(got, " ") != want {
		t.Errorf("listed %v, want %s", got, want)
	}
}

// A run names its env and its notice; the host fills in the env, and the nodes this member
// is told of: those of the notice it does not know, never itself. Past MaxNodesArg the
// nodes come as --nodes-file; CLUSTERFLOW_NODES_FILE lists them always.
func TestRunScriptResolvesItsEnvAndItsNodesOnTheHost(t *testing.T) {
	l := newLocal(t, "#!/bin/sh\necho \"$@\"; echo \"APP=$APP\"; echo \"lines=$(wc -l < \"$CLUSTERFLOW_NODES_FILE\")\"\n")
	ctx := context.Background()
	env := map[string]string{"APP": "from the env file"}
	// Two classes: ordinals 1-3 listed in configmeta 2, and 4-10000 in 3.
	var nodes []notice.Node
	for o := 1; o <= 10000; o++ {
		listedIn := 3
		if o <= 3 {
			listedIn = 2
		}
		nodes = append(nodes, notice.Node{Ordinal: o, Class: notice.Class{ListedIn: listedIn}})
	}
	small := notice.New(7, "c", spec.EventAddNodes, "w", nodes[:3])
	large := notice.New(8, "c", spec.EventAddNodes, "w", nodes)
	for _, n := range []notice.Notice{small, large} {
		files := backend.ClusterFiles{Cluster: "c", Envs: map[string]map[string]string{spec.EnvHash(env): env}, Notice: &n}
		if err := files.Unpack(); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteClusterFiles(ctx, files); err != nil {
			t.Fatal(err)
		}
	}
	m := backend.MemberRef{Cluster: "c", Role: "w", Name: "c-w-2"}
	if err := l.CreateMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	res := runScript(t, l, backend.ScriptRun{
		Member: m, Event: spec.EventAddNodes, ScriptHash: scriptHash, EnvHash: spec.EnvHash(env), Timeout: time.Minute,
		Notice: small.ID, Knows: &notice.Knowledge{ListedIn: 2, KnowsUpTo: 1},
	})
	for _, want := range []string{"--addnodes --role w --nodes c-w-1,c-w-3\n", "APP=from the env file\n", "lines=2\n"} {
		if !strings.Contains(res.StdoutTail, want) {
			t.Errorf("script output lacks %q:\n%s", want, res.StdoutTail)
		}
	}
	// Knowing configmeta 2, the member is told of the 9997 nodes listed in 3: 85 KB of
	// names, past MaxNodesArg.
	res = runScript(t, l, backend.ScriptRun{
		Member: m, Event: spec.EventAddNodes, ScriptHash: scriptHash, Timeout: time.Minute,
		Notice: large.ID, Knows: &notice.Knowledge{ListedIn: 2, KnowsUpTo: 2},
	})
	dir, _ := l.memberDir(m)
	for _, want := range []string{"--addnodes --role w --nodes-file " + filepath.Join(dir, ".clusterflow", "addnodes.nodes") + "\n", "lines=9997\n"} {
		if !strings.Contains(res.StdoutTail, want) {
			t.Errorf("script output lacks %q:\n%s", want, res.StdoutTail)
		}
	}
	// What a host cannot check is refused: an env whose content does not match its hash, a
	// notice it does not have, a notice for another event.
	tampered := backend.ClusterFiles{Cluster: "c", Envs: map[string]map[string]string{spec.EnvHash(env): {"APP": "changed"}}}
	if err := tampered.Unpack(); err == nil || !strings.Contains(err.Error(), "does not match its hash") {
		t.Errorf("a tampered env was taken: %v", err)
	}
	for _, bad := range []backend.ScriptRun{
		{Member: m, Event: spec.EventAddNodes, ScriptHash: scriptHash, Timeout: time.Minute, Notice: 99, Knows: &notice.Knowledge{}},
		{Member: m, Event: spec.EventDelNodes, ScriptHash: scriptHash, Timeout: time.Minute, Notice: small.ID, Knows: &notice.Knowledge{}},
		{Member: m, Event: spec.EventConfigure, ScriptHash: scriptHash, Timeout: time.Minute, EnvHash: strings.Repeat("ab", 32)},
	} {
		if err := l.LaunchScript(ctx, bad, completion(bad)); err == nil {
			t.Errorf("launched %+v", bad)
		}
	}
}

func records(t *testing.T, l *Backend, m backend.MemberRef) string {
	t.Helper()
	dir, err := l.layout.Records(m.Folder(), m.Name)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A cluster folder records the namespace that owns it and the hash of its folder key, and
// a worker of another namespace neither lists it, nor writes, reads or removes anything of
// it, unless a write of its presents the key (an import's): the folder is then its own,
// and the first namespace's no longer.
func TestAWorkerTouchesNothingAnotherNamespaceOwnsButWithItsKey(t *testing.T) {
	root := t.TempDir()
	workers := map[string]*Backend{}
	for _, owner := range []string{"ns-a", "ns-b"} {
		l, err := New(root)
		if err != nil {
			t.Fatal(err)
		}
		l.Owner = owner
		workers[owner] = l
	}
	ctx := context.Background()
	m := backend.MemberRef{Cluster: "c", Home: "0123456789ab", Role: "w", Name: "c-w-0"}
	files := backend.ClusterFiles{Cluster: "c", Home: m.Home, FolderKey: "the key"}
	if err := workers["ns-a"].WriteClusterFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	if err := workers["ns-a"].CreateMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	key := m.Folder().Key()
	lists := func(owner string) bool {
		held, err := workers[owner].ListClusters(ctx)
		if err != nil || len(held) > 1 || (len(held) == 1 && (held[0].Key() != key || held[0].Elsewhere)) {
			t.Fatalf("%s lists %+v, %v; want the cluster %s or nothing", owner, held, err, key)
		}
		return len(held) == 1
	}
	if lists("ns-b") || !lists("ns-a") {
		t.Error("the folder is not listed to ns-a alone")
	}
	var elsewhere *backend.OwnedElsewhereError
	for what, err := range map[string]error{
		"remove its member":      workers["ns-b"].RemoveMember(ctx, m),
		"remove the cluster":     workers["ns-b"].RemoveCluster(ctx, key),
		"create a member":        workers["ns-b"].CreateMember(ctx, backend.MemberRef{Cluster: "c", Home: m.Home, Role: "w", Name: "c-w-1"}),
		"write with no key":      workers["ns-b"].WriteClusterFiles(ctx, backend.ClusterFiles{Cluster: "c", Home: m.Home}),
		"write with another key": workers["ns-b"].WriteClusterFiles(ctx, backend.ClusterFiles{Cluster: "c", Home: m.Home, FolderKey: "a guess"}),
		"launch a script in it":  workers["ns-b"].LaunchScript(ctx, backend.ScriptRun{Member: m, Event: spec.EventConfigure}, backend.Completion{}),
		"stop a script in it":    workers["ns-b"].StopScript(ctx, backend.ScriptStop{Member: m, Event: spec.EventConfigure}),
		"recheck its member":     workers["ns-b"].RecheckMember(ctx, m),
	} {
		if !errors.As(err, &elsewhere) {
			t.Errorf("ns-b may %s of ns-a's cluster: %v", what, err)
		}
	}
	if _, err := workers["ns-b"].ReadLog(ctx, backend.LogRequest{Member: m, Event: spec.EventConfigure}); !errors.As(err, &elsewhere) {
		t.Errorf("ns-b may read ns-a's member's output: %v", err)
	}
	if _, err := workers["ns-b"].ListMembers(ctx, key); !errors.As(err, &elsewhere) {
		t.Errorf("ns-b may list ns-a's members: %v", err)
	}
	if _, err := workers["ns-b"].DescribeMember(ctx, m); !errors.As(err, &elsewhere) {
		t.Errorf("ns-b may describe ns-a's member: %v", err)
	}
	if d, err := workers["ns-a"].DescribeMember(ctx, m); err != nil || d.Missing || d.Dir == "" {
		t.Errorf("ns-a describing its own member: %+v, %v", d, err)
	}
	if err := workers["ns-a"].RecheckMember(ctx, m); err != nil {
		t.Errorf("ns-a rechecking its own member: %v", err)
	}
	sandbox, _ := workers["ns-a"].memberDir(m)
	if _, err := os.Stat(sandbox); err != nil {
		t.Fatalf("ns-a's member is gone: %v", err)
	}
	// The import's write presents the key: the folder is ns-b's from then on.
	if err := workers["ns-b"].WriteClusterFiles(ctx, files); err != nil {
		t.Fatalf("ns-b writing with the folder's key: %v", err)
	}
	if err := workers["ns-a"].RemoveMember(ctx, m); !errors.As(err, &elsewhere) {
		t.Errorf("ns-a removing a member of the folder handed over: %v", err)
	}
	if err := workers["ns-b"].RemoveMember(ctx, m); err != nil {
		t.Errorf("ns-b removing its own member: %v", err)
	}
	if err := workers["ns-b"].RemoveCluster(ctx, key); err != nil {
		t.Errorf("ns-b removing its own cluster: %v", err)
	}
}

// The agent completes script activities itself, with the runner's result and error types:
// they must read as the seam's.
func TestAgentResultsAreTheSeams(t *testing.T) {
	sent := runner.Result{Outcome: runner.TimedOut, ExitCode: 143, Duration: time.Second, StdoutTail: "out", StderrTail: "err"}
	data, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	var got backend.ScriptResult
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := backend.ScriptResult{Outcome: backend.TimedOut, ExitCode: 143, Duration: time.Second, StdoutTail: "out", StderrTail: "err"}
	if got != want {
		t.Errorf("runner result %+v reads as %+v, want %+v", sent, got, want)
	}
	for _, o := range [][2]string{{string(runner.Exited), string(backend.Exited)}, {string(runner.Canceled), string(backend.Canceled)},
		{agent.ErrScriptFailed, backend.ErrScriptFailed}, {agent.ErrScriptTimedOut, backend.ErrScriptTimedOut}} {
		if o[0] != o[1] {
			t.Errorf("the agent says %q where the seam says %q", o[0], o[1])
		}
	}
}
