package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// These tests run the agent in-process with no Temporal at its address (port 1 refuses),
// so results stay on disk, where the tests read them.

type fixture struct {
	t      *testing.T
	dir    string
	client *Client
	stop   func()
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir()}
	f.client = &Client{Dir: filepath.Join(f.dir, "agent")}
	f.start()
	return f
}

// start serves the agent folder until the test ends or stop is called.
func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, Options{Dir: f.client.Dir}) }()
	f.stop = func() {
		cancel()
		if err := <-served; err != nil {
			f.t.Errorf("agent: %v", err)
		}
	}
	f.t.Cleanup(func() {
		if ctx.Err() == nil {
			f.stop()
		}
	})
	testlimit.Poll(f.t, "the agent to answer", 10*time.Second, f.client.Running)
}

// The fixture's runs are member c-m-0's, of cluster c, in the data folder the agent's
// folder is in.
const testCluster, testMember = "c", "c-m-0"

// sandbox is the member's folder, where its scripts run and write.
func (f *fixture) sandbox() string {
	return filepath.Join(filepath.Dir(f.client.Dir), "clusters", testCluster, testMember)
}

// install puts a startscript where the agent looks for it, by its hash, and makes the
// member's sandbox.
func (f *fixture) install(body string) string {
	f.t.Helper()
	if err := os.MkdirAll(f.sandbox(), 0o755); err != nil {
		f.t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(body)))
	script := filepath.Join(filepath.Dir(f.sandbox()), ".clusterflow", "scripts", sum)
	// A file per body, written once: rewriting a script that an earlier launch is starting
	// fails with "text file busy".
	if _, err := os.Stat(script); err != nil {
		if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
	return sum
}

func (f *fixture) launchOf(id, token, sum string) Launch {
	return Launch{
		Key: Key{WorkflowID: "wf", ActivityID: id}, TaskToken: []byte(token),
		Connection: Connection{ClientConfigProfile: envconfig.ClientConfigProfile{Address: "127.0.0.1:1"}},
		Cluster:    testCluster, Member: testMember, Event: "configure",
		Script:  Script{SHA256: sum, Env: []string{"PATH=" + os.Getenv("PATH")}},
		Timeout: time.Minute, Grace: time.Second,
	}
}

// launch launches body as the run for activity id.
func (f *fixture) launch(id, token, body string) string {
	f.t.Helper()
	reply, err := f.client.Launch(context.Background(), f.launchOf(id, token, f.install("#!/bin/sh\n"+body)))
	if err != nil {
		f.t.Fatal(err)
	}
	return reply.Action
}

func (f *fixture) recordDir(id string) string {
	return filepath.Join(f.client.Dir, "records", testCluster, testMember, Key{WorkflowID: "wf", ActivityID: id}.ID())
}

func (f *fixture) record(id string) *record {
	rec, _ := loadRecord(f.recordDir(id))
	return rec
}

func (f *fixture) waitResult(id string) runner.Result {
	f.t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if rec := f.record(id); rec != nil && rec.Result != nil {
			return *rec.Result
		}
	}
	f.t.Fatal("no result recorded")
	return runner.Result{}
}

func (f *fixture) runs() int {
	data, _ := os.ReadFile(filepath.Join(f.sandbox(), "count"))
	return strings.Count(string(data), "run\n")
}

const countingScript = "echo run >> count; sleep ${SLEEP:-0.5}; echo done\n"

func TestARelaunchAttachesToTheRunningScript(t *testing.T) {
	f := newFixture(t)
	if action := f.launch("1", "attempt-1", countingScript); action != ActionStarted {
		t.Fatalf("first launch: %s", action)
	}
	if action := f.launch("1", "attempt-2", countingScript); action != ActionAttached {
		t.Fatalf("relaunch while running: %s", action)
	}
	if res := f.waitResult("1"); res.ExitCode != 0 || res.StdoutTail != "done\n" {
		t.Errorf("result %+v", res)
	}
	if string(f.record("1").TaskToken) != "attempt-2" {
		t.Error("the result would go to the old attempt")
	}
	if action := f.launch("1", "attempt-3", countingScript); action != ActionDelivering {
		t.Fatalf("relaunch after the end: %s", action)
	}
	if n := f.runs(); n != 1 {
		t.Errorf("script ran %d times, want once", n)
	}
}

// Launches start in parallel, outside the agent's lock; launches of one run that arrive
// together (a retry racing the first attempt) still start it once: one is started, the
// others attach.
func TestLaunchesAtOnceStartEachRunOnce(t *testing.T) {
	f := newFixture(t)
	sum := f.install("#!/bin/sh\n" + countingScript)
	const runs, copies = 8, 4
	actions := make(chan string, runs*copies)
	errs := make(chan error, runs*copies)
	for i := range runs * copies {
		go func() {
			l := f.launchOf(fmt.Sprint(i%runs), fmt.Sprintf("token-%d", i), sum)
			l.Script.Env = append(l.Script.Env, "SLEEP=1")
			reply, err := f.client.Launch(context.Background(), l)
			errs <- err
			actions <- reply.Action
		}()
	}
	started := 0
	for range runs * copies {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		switch action := <-actions; action {
		case ActionStarted:
			started++
		case ActionAttached, ActionDelivering:
		default:
			t.Errorf("launch answered %q", action)
		}
	}
	for i := range runs {
		f.waitResult(fmt.Sprint(i))
	}
	if started != runs {
		t.Errorf("%d launches started a script, want %d (one per run)", started, runs)
	}
	if n := f.runs(); n != runs {
		t.Errorf("scripts ran %d times, want %d", n, runs)
	}
}

func TestARestartedAgentAdoptsARunThatEndedWhileItWasDown(t *testing.T) {
	f := newFixture(t)
	f.launch("1", "t", countingScript)
	f.stop()
	// The script carries on and ends without any agent; its wrapper keeps the status.
	time.Sleep(time.Second)
	if rec := f.record("1"); rec.Result != nil {
		t.Fatal("a stopped agent recorded a result")
	}
	f.start()
	if res := f.waitResult("1"); res.ExitCode != 0 || res.Outcome != runner.Exited {
		t.Errorf("result %+v", res)
	}
	if n := f.runs(); n != 1 {
		t.Errorf("script ran %d times, want once", n)
	}
}

func TestOnlyALostRunRunsAgain(t *testing.T) {
	f := newFixture(t)
	f.launch("1", "t", "echo run >> count; sleep 30\n")
	testlimit.Poll(t, "the script to start", 10*time.Second, func() bool { return f.runs() > 0 })
	// The script's whole group dies without a trace, as with a machine reboot.
	if err := syscall.Kill(-f.record("1").Handle.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); !f.record("1").Lost; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the run was not found lost")
		}
	}
	if action := f.launch("1", "t2", countingScript); action != ActionStarted {
		t.Fatalf("relaunch of a lost run: %s", action)
	}
	f.waitResult("1")
	if n := f.runs(); n != 2 {
		t.Errorf("script ran %d times, want twice (once lost, once again)", n)
	}
}

func TestATimedOutScriptIsStopped(t *testing.T) {
	f := newFixture(t)
	f.launch("1", "t", "echo run >> count; sleep 30\n")
	// Shorten the deadline the way a record from a long-running agent would have it.
	f.stop()
	rec := f.record("1")
	rec.Timeout = 100 * time.Millisecond
	if err := rec.save(f.recordDir("1")); err != nil {
		t.Fatal(err)
	}
	f.start()
	if res := f.waitResult("1"); res.Outcome != runner.TimedOut {
		t.Errorf("result %+v", res)
	}
	if f.record("1").Handle.Running() {
		t.Error("script still running after its timeout")
	}
}

func TestAnIdleAgentExitsOnlyOnceItsRunsAreDone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), Options{Dir: dir, IdleExit: 300 * time.Millisecond}) }()
	f := &fixture{t: t, dir: filepath.Dir(dir), client: &Client{Dir: dir}}
	testlimit.Poll(t, "the agent to answer", 10*time.Second, f.client.Running)
	// A run that outlasts the idle time keeps the agent up; once it is done, the agent goes.
	// (With no Temporal to take the result, the run is done only because its member is
	// removed: a result waiting for delivery would keep the agent up too.)
	start := time.Now()
	f.launch("1", "t", "touch ../started; sleep 1\n")
	testlimit.Poll(t, "the script to start", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(filepath.Dir(f.sandbox()), "started"))
		return err == nil
	})
	for _, dir := range []string{f.sandbox(), filepath.Join(dir, "records", testCluster, testMember)} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-served:
		if elapsed := time.Since(start); elapsed < time.Second {
			t.Fatalf("agent exited after %s, while its run still needed it (%v)", elapsed, err)
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("idle agent did not exit")
	}
	if f.client.Running() {
		t.Error("agent still answers after exiting")
	}
}

func TestAnAgentInADeepFolderServes(t *testing.T) {
	f := &fixture{t: t, dir: filepath.Join(t.TempDir(), strings.Repeat("deep-folder/", 10))}
	f.client = &Client{Dir: filepath.Join(f.dir, "agent")}
	if len(filepath.Join(f.client.Dir, "agent.sock")) <= 108 {
		t.Fatal("the folder is not deep enough to test anything")
	}
	f.start()
	if action := f.launch("1", "t", "exit 0\n"); action == "" {
		t.Error("no launch reply")
	}
	if res := f.waitResult("1"); res.ExitCode != 0 {
		t.Errorf("exit %d", res.ExitCode)
	}
}

// A stop reaches a quiet script at once, not at its next heartbeat: the run ends cancelled
// (its process group killed). A stop for another workflow, member or event, or for a run
// that has ended, stops nothing.
func TestAStopEndsTheRunAtOnce(t *testing.T) {
	f := newFixture(t)
	if action := f.launch("a1", "token", "sleep 30\n"); action != ActionStarted {
		t.Fatalf("launch: %s", action)
	}
	for _, other := range []Stop{{WorkflowID: "other", Member: testMember, Event: "configure"}, {WorkflowID: "wf", Member: "c-n-0", Event: "configure"}, {WorkflowID: "wf", Member: testMember, Event: "teardown"}} {
		if reply, err := f.client.Stop(context.Background(), other); err != nil || reply.Action != "stopped 0" {
			t.Errorf("stop %+v: %v, %v", other, reply, err)
		}
	}
	started := time.Now()
	reply, err := f.client.Stop(context.Background(), Stop{WorkflowID: "wf", Member: testMember, Event: "configure"})
	if err != nil || reply.Action != "stopped 1" {
		t.Fatalf("stop: %v, %v", reply, err)
	}
	res := f.waitResult("a1")
	if res.Outcome != runner.Canceled {
		t.Errorf("the stopped run ended %+v, want canceled", res)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("the stop took %s", took)
	}
	if reply, err := f.client.Stop(context.Background(), Stop{WorkflowID: "wf", Member: testMember, Event: "configure"}); err != nil || reply.Action != "stopped 0" {
		t.Errorf("a second stop: %v, %v", reply, err)
	}
}

// Only the agent's own user may use its socket. With the folder opened up (as an older
// version left it), a process of another user reaches the socket and is still refused:
// its stop gets no answer, while the same stop from the agent's user does.
func TestTheAgentRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to connect as another user (CI runs the tests as root)")
	}
	f := newFixture(t)
	if reply, err := f.client.Stop(context.Background(), Stop{WorkflowID: "wf", Member: testMember, Event: "configure"}); err != nil || reply.Action != "stopped 0" {
		t.Fatalf("a stop from the agent's user: %v, %v", reply, err)
	}
	sock := SocketPath(f.client.Dir)
	for d := filepath.Dir(sock); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	probe := `import os, socket
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(os.environ["SOCK"])
try:
    s.sendall(b'{"stop":{"workflowId":"wf","member":"m","event":"configure"}}\n')
    answer = s.recv(4096).decode()
except (ConnectionResetError, BrokenPipeError):  # closed before or with the request unread
    answer = ""
print("answer:" + answer)`
	cmd := exec.CommandContext(ctx, "python3", "-c", probe)
	cmd.Env = append(os.Environ(), "SOCK="+sock)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "answer:" {
		t.Errorf("another user's stop: %v, %q; want the connection closed with no answer", err, out)
	}
}

// The agent runs a startscript only when its content is what the launch's hash says: one
// changed on the host since (by a member, say) is refused, for good, and nothing runs.
func TestAScriptThatIsNotItsHashIsRefused(t *testing.T) {
	f := newFixture(t)
	body := "#!/bin/sh\necho run >> count\n"
	sum := f.install(body)
	launch := func(id string) error {
		_, err := f.client.Launch(context.Background(), f.launchOf(id, "t", sum))
		return err
	}
	if err := launch("1"); err != nil {
		t.Fatalf("the script as hashed: %v", err)
	}
	f.waitResult("1")
	script := filepath.Join(filepath.Dir(f.sandbox()), ".clusterflow", "scripts", sum)
	if err := os.WriteFile(script, []byte(body+"echo evil >> count\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := launch("2")
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "was changed on this host") {
		t.Fatalf("a changed script: %v, want a refusal", err)
	}
	if f.runs() != 1 || f.record("2") != nil {
		t.Errorf("the changed script ran (%d runs) or left a record", f.runs())
	}
}

// The agent derives every path of a run from the names in its launch, and refuses names
// that would lead out of its data folder, before anything runs.
func TestALaunchNamesWhatToRunNeverWhere(t *testing.T) {
	f := newFixture(t)
	sum := f.install("#!/bin/sh\necho run >> count\n")
	for name, change := range map[string]func(*Launch){
		"a cluster out of the folder": func(l *Launch) { l.Cluster = "../c" },
		"a member of another cluster": func(l *Launch) { l.Member = "d-m-0" },
		"a member's path":             func(l *Launch) { l.Member = "c-m-0/../../d/d-m-0" },
		"an unknown event":            func(l *Launch) { l.Event = "../../../etc/x" },
		"a script that is no hash":    func(l *Launch) { l.Script.SHA256 = "../../../bin/sh" },
	} {
		l := f.launchOf(name, "t", sum)
		change(&l)
		_, err := f.client.Launch(context.Background(), l)
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if f.runs() != 0 {
		t.Errorf("%d runs", f.runs())
	}
}

// A script's sandbox is its own, links and all: a link it plants where its output goes
// leads the agent (root, where scripts have users) nowhere out of the sandbox. The agent
// neither appends the output to the link's target nor reads it into a tail.
func TestALinkInTheSandboxLeadsNowhere(t *testing.T) {
	f := newFixture(t)
	secret := filepath.Join(f.dir, "secret")
	if err := os.WriteFile(secret, []byte("the host's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.sandbox(), "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Planted before the run: the output file is a link to the secret.
	if err := os.Symlink(secret, filepath.Join(f.sandbox(), "logs", "configure.stdout")); err != nil {
		t.Fatal(err)
	}
	f.launch("1", "t", "echo output\n")
	if res := f.waitResult("1"); res.ExitCode != 0 || res.StdoutTail != "output\n" {
		t.Errorf("the run: %+v", res)
	}
	// Planted during the run: the output file turned into a link before the tail is read.
	f.launch("2", "t", "rm logs/configure.stdout; ln -s "+secret+" logs/configure.stdout\n")
	if res := f.waitResult("2"); strings.Contains(res.StdoutTail, "secret") {
		t.Errorf("the tail read the link's target: %+v", res)
	}
	if data, _ := os.ReadFile(secret); string(data) != "the host's secret\n" {
		t.Errorf("the link's target was written: %q", data)
	}
}

// An agent of an older protocol, left running by the version a worker was upgraded from,
// is replaced: the launch is run by a new agent.
func TestAnAgentOfAnOlderProtocolIsReplaced(t *testing.T) {
	f := newFixture(t)
	f.stop()
	// The old agent answers every launch with an error, and exits on SIGTERM.
	old := exec.Command("python3", "-c", `import json, os, signal, socket, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
if os.path.exists(sys.argv[1]): os.unlink(sys.argv[1])
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "w").write(str(os.getpid()))
while True:
    c, _ = s.accept()
    try:
        if c.makefile("rb").readline():
            c.sendall(json.dumps({"error": "launch needs a script path and output files"}).encode() + b"\n")
    except OSError:
        pass
    c.close()`,
		SocketPath(f.client.Dir), filepath.Join(f.client.Dir, "agent.pid"))
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- old.Wait() }()
	t.Cleanup(func() { _ = old.Process.Kill() })
	// It writes its pid file after it listens: until then the file names the fixture's
	// agent, this test process, which a replacement would signal instead (a flake seen
	// on a busy machine).
	testlimit.Poll(t, "the old agent to answer and name itself", 10*time.Second, func() bool {
		pid, ok := f.client.PID()
		return ok && pid == old.Process.Pid
	})
	// The new agent, started by the client as a worker does.
	f.client.Command = []string{os.Args[0], "-test.run=^TestServeAgentProcess$", "--", f.client.Dir}
	if action := f.launch("1", "t", "exit 0\n"); action != ActionStarted {
		t.Errorf("launch: %q", action)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Error("the old agent was not stopped")
	}
	if res := f.waitResult("1"); res.ExitCode != 0 {
		t.Errorf("the run: %+v", res)
	}
	if _, err := f.client.Stop(context.Background(), Stop{WorkflowID: "x", Member: testMember, Event: "configure"}); err != nil {
		t.Error(err)
	}
	if pid, ok := f.client.PID(); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		testlimit.Poll(t, "the new agent to stop", 10*time.Second, func() bool { return !f.client.Running() })
	}
}

// TestServeAgentProcess is the agent process TestAnAgentOfAnOlderProtocolIsReplaced starts;
// run by itself, it does nothing.
func TestServeAgentProcess(t *testing.T) {
	if len(os.Args) < 3 || os.Args[len(os.Args)-2] != "--" {
		return
	}
	dir := os.Args[len(os.Args)-1]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
}
