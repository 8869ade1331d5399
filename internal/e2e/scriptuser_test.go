package e2e

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// hostileScript tries, as a member, what would let it act as the host, and writes into its
// own sandbox, for each, whether it was refused or it leaked.
const hostileScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
out="$CLUSTERFLOW_MEMBER_DIR/hostile.log"
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name leaked" >> "$out"; else echo "$name refused" >> "$out"; fi; }
try run-as-root test "$(id -u)" = 0
try read-agent-connections sh -c 'cat "$AGENT_DIR"/connections/*.json'
try read-agent-environ cat "/proc/$AGENT_PID/environ"
try rewrite-run-record sh -c 'for f in "$AGENT_DIR"/records/*/*/*/record.json; do echo x > "$f" || exit 1; done'
try connect-agent-socket perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 1' "$AGENT_SOCKET"
try signal-agent kill -0 "$AGENT_PID"
echo done >> "$out"
`

// With --script-user, a member's script runs as that unprivileged user, not the root
// worker, in a sandbox that user owns (mode 0700, nothing in it root's): it cannot read
// the agent's connections or environment, rewrite its run record, reach the agent's socket,
// signal the agent, or be root. Each attempt is made by a hostile script, which records
// what happened; the test counts the refusals and the leaks (none allowed).
func TestAScriptUserKeepsAMemberFromTheHost(t *testing.T) {
	t.Parallel()
	guard(t)
	if os.Geteuid() != 0 {
		t.Fatal("script users need the tests to run as root, as CI does")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	// The data folder must let the script user through; a test's temporary folder does not.
	data, err := os.MkdirTemp("", "cf-scriptuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	testenv.StopAllAtEnd(t, data)
	s := newServerStack(t)
	s.start("worker", 1, "Worker starting", "worker", "--data", data, "--script-user", "nobody")

	// A first cluster starts the agent, whose PID the hostile script is handed.
	dir := t.TempDir()
	script := filepath.Join(dir, "hostile.sh")
	if err := os.WriteFile(script, []byte(hostileScript), 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(data, "agent")
	spec := func(name string) string {
		pid, _ := os.ReadFile(filepath.Join(agentDir, "agent.pid"))
		p := filepath.Join(dir, name+".yaml")
		body := "name: " + name + "\nroles:\n  - {name: m, members: 2, startscript: " + script + ", env: {AGENT_DIR: " + agentDir +
			", AGENT_PID: \"" + strings.TrimSpace(string(pid)) + "\", AGENT_SOCKET: " + agent.SocketPath(agentDir) + "}}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if res := s.cli("deploy", "-f", spec("warmup"), "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	if res := s.cli("deploy", "-f", spec("hostile"), "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	refused, leaked := 0, 0
	for _, m := range []string{"hostile-m-0", "hostile-m-1"} {
		sandbox := filepath.Join(data, "clusters", "hostile", m)
		log, err := os.ReadFile(filepath.Join(sandbox, "hostile.log"))
		if err != nil || !strings.HasSuffix(string(log), "done\n") {
			t.Fatalf("%s's hostile script did not finish: %q, %v", m, log, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
			switch {
			case strings.HasSuffix(line, " refused"):
				refused++
			case strings.HasSuffix(line, " leaked"):
				leaked++
				t.Errorf("%s: %s", m, line)
			}
		}
		if info, err := os.Stat(sandbox); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s's sandbox: %v, %v; want mode 0700", m, info, err)
		}
		_ = filepath.WalkDir(sandbox, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err == nil && int(info.Sys().(*syscall.Stat_t).Uid) != uid {
				t.Errorf("%s is owned by uid %d, not the script user's %d", path, info.Sys().(*syscall.Stat_t).Uid, uid)
			}
			return nil
		})
	}
	t.Logf("hostile actions: %d tried, %d refused, %d leaked", refused+leaked, refused, leaked)
	if refused != 12 {
		t.Errorf("%d refusals, want 6 for each of 2 members", refused)
	}
	if st := s.status("hostile"); st.Phase != workflows.PhaseReady {
		t.Errorf("hostile cluster %s", st.Phase)
	}
	for _, n := range []string{"warmup", "hostile"} {
		if res := s.cli("delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
	waitUpTo(t, time.Minute, "the sandboxes removed", func() bool {
		entries, _ := os.ReadDir(filepath.Join(data, "clusters"))
		return len(entries) == 0
	})
}
