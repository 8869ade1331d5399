package runner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func script(t *testing.T, body string) Spec {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Path: path, Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH")},
		Sandbox: dir, StdoutFile: "out", StderrFile: "err", ExitFile: "exit",
	}
}

// spawn starts the script and stops whatever is left of it when the test ends.
func spawn(t *testing.T, s Spec) Handle {
	t.Helper()
	h, _, err := Spawn(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(0) })
	return h
}

func waitExit(t *testing.T, h Handle) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if code, ok := h.ExitCode(); ok {
			return code
		}
	}
	t.Fatal("the script wrote no exit status")
	return 0
}

func waitLine(t *testing.T, h Handle, line string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if h.LastLine() == line {
			return
		}
	}
	t.Fatalf("the script never printed %q; last line %q", line, h.LastLine())
}

func TestSpawnRecordsExitStatusAndTails(t *testing.T) {
	s := script(t, "echo first; echo oops >&2; exit 3\n")
	h := spawn(t, s)
	if code := waitExit(t, h); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	if out, errOut := h.Tails(); out != "first\n" || errOut != "oops\n" {
		t.Errorf("tails %q %q", out, errOut)
	}
	// A second run appends to the logs, but its tails hold only its own output.
	h = spawn(t, s)
	waitExit(t, h)
	if out, _ := h.Tails(); out != "first\n" {
		t.Errorf("tail mixes runs: %q", out)
	}
	if data, _ := os.ReadFile(filepath.Join(s.Sandbox, s.StdoutFile)); string(data) != "first\nfirst\n" {
		t.Errorf("log not appended: %q", data)
	}
}

func TestTailKeepsOnlyTheEnd(t *testing.T) {
	h := spawn(t, script(t, "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done\n"))
	waitExit(t, h)
	out, _ := h.Tails()
	if len(out) > TailSize || !strings.HasPrefix(out, "line") || !strings.HasSuffix(out, "line1999\n") {
		t.Errorf("bad tail (%d bytes): %q...", len(out), out[:20])
	}
}

func TestAStoredHandleFollowsTheRun(t *testing.T) {
	// A restarted agent has only the handle it stored on disk.
	h := spawn(t, script(t, "echo started; sleep 0.3; echo done; exit 4\n"))
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var stored Handle
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	waitLine(t, stored, "started")
	if !stored.Running() {
		t.Fatal("run not seen as running")
	}
	if code := waitExit(t, stored); code != 4 {
		t.Errorf("exit status %d, want 4", code)
	}
	waitGone(t, stored)
}

func TestStopReachesTheWholeGroupAndKeepsTheExitStatus(t *testing.T) {
	s := script(t, "sleep 60 & echo $! > child.pid; echo started; wait\n")
	h := spawn(t, s)
	waitLine(t, h, "started")
	h.Stop(5 * time.Second)
	if h.Running() {
		t.Error("group still running after Stop")
	}
	// The wrapper outlives SIGTERM long enough to record how the script ended.
	if code := waitExit(t, h); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	assertGone(t, filepath.Join(s.Dir, "child.pid"))
}

func TestStopKillsWhatIgnoresTerm(t *testing.T) {
	s := script(t, "sleep 60 & echo $! > child.pid; trap '' TERM; echo started; sleep 60\n")
	h := spawn(t, s)
	waitLine(t, h, "started")
	h.Stop(200 * time.Millisecond)
	if h.Running() {
		t.Error("group still running after Stop")
	}
	assertGone(t, filepath.Join(s.Dir, "child.pid"))
}

func TestStopGivesChildrenTheirGracePeriod(t *testing.T) {
	// The child needs a moment after SIGTERM to finish up; the script itself exits at once.
	// "started" is printed only once the child's trap is set: before that, SIGTERM would
	// end the child at once and the test would blame Stop for it.
	s := script(t, `sh -c 'trap "sleep 0.3; echo cleaned > cleaned; exit 0" TERM; : > trapped; while :; do sleep 0.05; done' &
echo $! > child.pid
while [ ! -e trapped ]; do sleep 0.01; done
echo started
wait
`)
	h := spawn(t, s)
	waitLine(t, h, "started")
	h.Stop(5 * time.Second)
	if _, err := os.Stat(filepath.Join(s.Dir, "cleaned")); err != nil {
		t.Errorf("the child was killed before its grace period was over: %v", err)
	}
	assertGone(t, filepath.Join(s.Dir, "child.pid"))
}

func TestAMissingScriptExitsWith127(t *testing.T) {
	s := script(t, "")
	s.Path = filepath.Join(s.Dir, "missing")
	h := spawn(t, s)
	if code := waitExit(t, h); code != 127 {
		t.Errorf("exit status %d, want 127", code)
	}
}

func TestAReusedPIDIsNotTakenForTheRun(t *testing.T) {
	h := spawn(t, script(t, "exit 0\n"))
	waitExit(t, h)
	waitGone(t, h)
	h.PID = os.Getpid() // alive, but started at another time than the run
	if h.Running() {
		t.Error("a different process with the run's PID was taken for the run")
	}
}

func waitGone(t *testing.T, h Handle) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !h.Running() {
			return
		}
	}
	t.Fatal("run still seen as running after it ended")
}

func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		// A zombie is gone for every practical purpose; check it is not still running.
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if !strings.Contains(string(stat), ") Z ") {
			t.Errorf("child %d still running after the group was stopped: %s", pid, stat)
		}
	}
}

// A script that ends at once must still leave its exit status, even when the caller has
// not made its run folder yet: the agent made it only after spawning, and under load a
// 0 s script ended first, was taken for lost and ran a second time.
func TestAQuickScriptLeavesItsStatusInAFolderNotYetMade(t *testing.T) {
	s := script(t, "exit 3\n")
	s.ExitFile = filepath.Join("runs", "r1", "exit")
	h := spawn(t, s)
	if code := waitExit(t, h); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
}

// The wrapper writes the status straight into the exit file: a file still empty, or
// without its newline, is a status being written (or one a dying wrapper never finished),
// never an exit.
func TestAnExitStatusCountsOnlyOnceWhole(t *testing.T) {
	s := script(t, "exit 0\n")
	h := Handle{Sandbox: s.Sandbox, ExitFile: "exit"}
	for _, partial := range []string{"", "1", "12"} {
		if err := os.WriteFile(filepath.Join(s.Sandbox, "exit"), []byte(partial), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, ok := h.ExitCode(); ok {
			t.Errorf("exit file %q read as exit status %d; want no status yet", partial, code)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Sandbox, "exit"), []byte("12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, ok := h.ExitCode(); !ok || code != 12 {
		t.Errorf("exit file \"12\\n\" read as (%d, %v), want (12, true)", code, ok)
	}
}

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// Running scripts must not each hold a thread of the agent: at 1,000 scripts that was
// 1,000 threads and about 90 MiB. Their exits are still seen at once.
func TestRunningScriptsDoNotHoldAThreadEach(t *testing.T) {
	const n = 60
	before := threads(t)
	for range n {
		spawn(t, script(t, "exec sleep 30\n"))
	}
	// Give a thread-per-wait design time to show: each wait blocks as its script runs.
	time.Sleep(500 * time.Millisecond)
	if grown := threads(t) - before; grown > n/3 {
		t.Errorf("%d running scripts added %d threads", n, grown)
	}
	s := script(t, "exit 0\n")
	_, exited, err := Spawn(s)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a script's exit was not seen within 10 s")
	}
}

// A handle from an earlier boot of the machine is never running and never signalled: its
// PID, even with the same start time, may be anyone's now.
func TestARunOfAnEarlierBootIsNeverSignalled(t *testing.T) {
	h := spawn(t, script(t, "echo up\nsleep 30\n"))
	waitLine(t, h, "up")
	if h.BootID == "" || !h.Running() {
		t.Fatalf("a run of this boot: boot ID %q, running %v", h.BootID, h.Running())
	}
	earlier := h
	earlier.BootID = "an-earlier-boot"
	if earlier.Running() {
		t.Error("a run of an earlier boot was taken for running")
	}
	earlier.Stop(0)
	if !h.Running() {
		t.Error("stopping a run of an earlier boot signalled the process that has its PID now")
	}
}

// A script that ends at once is still seen to end, and reaped: its exit can come before the
// watcher waits, and the watcher must not wait for a readiness the poller already reported
// (before, about one quick script in three stayed a zombie with its pidfd open until the
// agent exited: 5,646 of them after the size tests).
func TestEveryQuickScriptIsSeenToEndAndReaped(t *testing.T) {
	const n = 200
	var exits []<-chan struct{}
	pids := map[int]bool{}
	for range n {
		h, exited, err := Spawn(script(t, "exit 0\n"))
		if err != nil {
			t.Fatal(err)
		}
		exits = append(exits, exited)
		pids[h.PID] = true
	}
	deadline := time.After(20 * time.Second)
	for i, exited := range exits {
		select {
		case <-exited:
		case <-deadline:
			t.Fatalf("%d of %d quick scripts were not seen to end within 20 s", n-i, n)
		}
	}
	for pid := range pids {
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			t.Errorf("script %d is a zombie: its exit was seen but it was not reaped", pid)
		}
	}
}

// What a script's user may plant at its output's name turns nothing of root's against the
// host: a hard link to a root file outside the sandbox (/etc/shadow, where the host allows
// such links; root may always make one) is neither given to the user, nor written, nor
// read into a tail; and a FIFO there holds neither the start nor a tail.
func TestNoPlantedLinkOrFIFOTurnsRootAgainstTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("running a script as another user needs root, as CI runs the tests")
	}
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := script(t, "echo mine\n")
	s.User = &User{UID: 64300, GID: 64300}
	for dir := s.Sandbox; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(s.Sandbox, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(s.Sandbox, "out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(s.Sandbox, "err"), 0o666); err != nil {
		t.Fatal(err)
	}
	started := make(chan Handle, 1)
	go func() {
		h, _, err := Spawn(s)
		if err != nil {
			t.Error(err)
		}
		started <- h
	}()
	var h Handle
	select {
	case h = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO at the script's stderr held its start for 10 s")
	}
	t.Cleanup(func() { h.Stop(0) })
	if code := waitExit(t, h); code != 0 {
		t.Fatalf("exit %d", code)
	}
	info, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Nlink != 1 {
		t.Errorf("the linked file is now uid %d with %d links; want root's, unlinked from the sandbox", st.Uid, st.Nlink)
	}
	if data, _ := os.ReadFile(victim); string(data) != "root:secret\n" {
		t.Errorf("the linked file now holds %q", data)
	}
	if stdout, _ := h.Tails(); stdout != "mine\n" {
		t.Errorf("stdout tail %q, want the script's own output in a file of its own", stdout)
	}
	// A FIFO planted where a tail is read from later is refused, not waited on.
	out := filepath.Join(s.Sandbox, "out")
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(out, 0o666); err != nil {
		t.Fatal(err)
	}
	read := make(chan string, 1)
	go func() { stdout, _ := h.Tails(); read <- stdout }()
	select {
	case stdout := <-read:
		if stdout != "" {
			t.Errorf("a FIFO's tail: %q", stdout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO at the script's stdout held its tail for 10 s")
	}
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, out); err != nil {
		t.Fatal(err)
	}
	if stdout, _ := h.Tails(); strings.Contains(stdout, "secret") {
		t.Errorf("a hard link's tail read the linked file: %q", stdout)
	}
}

// A file of another user planted at the script's output's name (a hard link to it whose
// original was then removed, on a host that allows such links: one link, not the script
// user's) is neither written nor given to the script's user: it is replaced by a file of
// its own, and keeps its owner.
func TestAFileOfAnotherUserInASandboxIsNeverGivenAway(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("running a script as another user needs root, as CI runs the tests")
	}
	s := script(t, "echo mine\n")
	s.User = &User{UID: 64300, GID: 64300}
	for dir := s.Sandbox; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(s.Sandbox, 64300, 64300); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(s.Sandbox, "out")
	if err := os.WriteFile(planted, []byte("another's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 64301, 64301); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(planted)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, _, err := Spawn(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(0) })
	if code := waitExit(t, h); code != 0 {
		t.Fatalf("exit %d", code)
	}
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 64301 || info.Size() != int64(len("another's\n")) {
		t.Errorf("the other user's file is now uid %d, %d bytes; want it untouched", st.Uid, info.Size())
	}
	if stdout, _ := h.Tails(); stdout != "mine\n" {
		t.Errorf("stdout tail %q, want the script's own output in a file of its own", stdout)
	}
}

// A script runs under its limits, hard and soft alike, set by its wrapper shell before it
// starts; one above the starter's own hard limit is lowered to it.
func TestAScriptRunsUnderItsLimits(t *testing.T) {
	s := script(t, "ulimit -Hn; ulimit -Sn; { ulimit -Hu || ulimit -Hp; } 2>/dev/null\n")
	s.Limits = Limits{Processes: 123, OpenFiles: 456}
	h := spawn(t, s)
	if code := waitExit(t, h); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if stdout, stderr := h.Tails(); stdout != "456\n456\n123\n" {
		t.Errorf("limits seen by the script: %q (stderr %q), want open files 456 (hard and soft) and processes 123", stdout, stderr)
	}
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil || own.Max == unix.RLIM_INFINITY {
		return
	}
	s = script(t, "ulimit -Hn\n")
	s.Limits = Limits{OpenFiles: int(own.Max) + 1000}
	h = spawn(t, s)
	if code := waitExit(t, h); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if stdout, _ := h.Tails(); stdout != strconv.FormatUint(own.Max, 10)+"\n" {
		t.Errorf("a limit above the starter's: %q, want its own %d", stdout, own.Max)
	}
}
