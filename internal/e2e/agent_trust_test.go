package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/workflows"
)

// The agent keeps to itself what a script must not reach: it runs with a minimal
// environment (none of the worker's credentials in /proc/<agent>/environ), and its
// folder (connections, index, pid), socket and log are its user's alone.
func TestTheAgentKeepsTheWorkersSecretsToItself(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	s.env = append(s.env, "CLUSTERFLOW_TEST_WORKER_ONLY=worker-credential")
	s.startWorker()
	dir := t.TempDir()
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(specPath, []byte("name: kept\nroles:\n  - {name: w, members: 1, startscript: "+script+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	agentDir := filepath.Join(s.data, "agent")
	pidText, err := os.ReadFile(filepath.Join(agentDir, "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatalf("the agent (pid %d): %v", pid, err)
	}
	if bytes.Contains(environ, []byte("worker-credential")) {
		t.Error("the worker's environment reached the agent's /proc/<pid>/environ")
	}
	for path, want := range map[string]os.FileMode{
		agentDir: 0o700, filepath.Join(agentDir, "agent.pid"): 0o600, filepath.Join(agentDir, "agent.log"): 0o600,
		agent.SocketPath(agentDir): 0o600, filepath.Join(agentDir, "connections"): 0o700,
	} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %04o", path, statMode(fi, err), want)
		}
	}
	if res := s.cli("delete", "kept", "--wait"); res.Code != 0 || s.status("kept").Phase != workflows.PhaseDeleted {
		t.Errorf("delete: %s", res)
	}
}

// A script that floods its output cannot fill the host's disk: past 64 MiB an event's log
// is rotated once (FILE.1 replaced each time), and `logs` still shows what came after.
func TestAScriptsOutputIsCappedByRotation(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "flood.sh")
	flood := "#!/bin/sh\nhead -c 70000000 /dev/zero | tr '\\0' 'x' | fold -w 99\nsleep 5\necho after-the-flood\n"
	if err := os.WriteFile(script, []byte(flood), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(specPath, []byte("name: flood\nroles:\n  - {name: w, members: 1, startscript: "+script+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	logs := filepath.Join(clusterDir(s.data, "flood"), "flood-w-0", "logs")
	current, err := os.Stat(filepath.Join(logs, "configure.stdout"))
	if err != nil || current.Size() > 1<<20 {
		t.Errorf("configure.stdout after 70 MB of output: %v, want it rotated", statMode(current, err))
	}
	if rotated, err := os.Stat(filepath.Join(logs, "configure.stdout.1")); err != nil || rotated.Size() < 64<<20 {
		t.Errorf("configure.stdout.1: %v, want the flood", err)
	}
	if res := s.cli("logs", "flood", "flood-w-0", "--event", "configure", "--tail", "1"); res.Code != 0 || !strings.Contains(res.Stdout, "after-the-flood") {
		t.Errorf("logs after the rotation: %s", res)
	}
	if res := s.cli("delete", "flood", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// What a member may plant where the host reads and writes its output turns nothing of the
// host's against it, through the CLI: a FIFO at an event's output is refused by `logs`, not
// waited on (a FIFO once pinned an agent thread for good), and a file of another user there
// (a hard link whose original was removed, on a host that allows such links) is neither
// shown by `logs` nor given to the member's user by its next run, which writes a file of
// its own.
func TestPlantedFilesInASandboxTurnNothingAgainstTheHost(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: planted
roles:
  - {name: m, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}, events: [restart]}
`)
	if res := cli(t, "deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	t.Cleanup(func() { cli(t, "delete", "planted", "--wait") })
	logs := filepath.Join(clusterDir(dataDir, "planted"), "planted-m-0", "logs")
	for _, name := range []string{"start.stdout", "start.stderr"} {
		if err := syscall.Mkfifo(filepath.Join(logs, name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	foreign := filepath.Join(logs, "restart.stdout")
	_ = os.Remove(foreign)
	if err := os.WriteFile(foreign, []byte("another user's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 64310, 64310); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(foreign)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// run's own deadline fails the test should the FIFO hold the read.
	if res := cli(t, "logs", "planted", "planted-m-0", "--event", "start"); res.Code == -1 {
		t.Errorf("logs of a FIFO: %s", res)
	}
	if res := cli(t, "logs", "planted", "planted-m-0", "--event", "restart"); strings.Contains(res.Stdout+res.Stderr, "another user's") {
		t.Errorf("logs showed another user's file planted as the member's output: %s", res)
	}
	if res := cli(t, "restart", "planted", "--wait"); res.Code != 0 {
		t.Fatalf("restart: %s", res)
	}
	info, err := held.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 64310 || info.Size() != int64(len("another user's\n")) {
		t.Errorf("the planted file is now uid %d, %d bytes; want it untouched", st.Uid, info.Size())
	}
	if res := cli(t, "logs", "planted", "planted-m-0", "--event", "restart"); res.Code != 0 || strings.Contains(res.Stdout, "another user's") {
		t.Errorf("logs of the restart: %s; want its own output", res)
	}
}
