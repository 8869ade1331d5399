package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	cfcli "github.com/clusterflow/clusterflow/internal/cli"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// hostileScript tries, as a member, what would let it act as the host, and writes into its
// own sandbox, for each, whether it was refused or it leaked.
const hostileScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || { echo "written by $CLUSTERFLOW_EVENT"; exit 0; }
out="$CLUSTERFLOW_MEMBER_DIR/hostile.log"
# Links where the host reads and writes the member's output: to be followed by nobody.
ln -sf "$VICTIM" "$CLUSTERFLOW_MEMBER_DIR/logs/teardown.stdout"
ln -sf "$VICTIM" "$CLUSTERFLOW_MEMBER_DIR/logs/start.stdout"
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name leaked" >> "$out"; else echo "$name refused" >> "$out"; fi; }
try run-as-root test "$(id -u)" = 0
try read-agent-connections sh -c 'cat "$AGENT_DIR"/connections/*.json'
try read-agent-environ cat "/proc/$AGENT_PID/environ"
try rewrite-run-record sh -c 'for f in "$AGENT_DIR"/records/*/*/*/record.json; do echo x > "$f" || exit 1; done'
try connect-agent-socket perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 1' "$AGENT_SOCKET"
try signal-agent kill -0 "$AGENT_PID"
[ -z "$OTHER" ] || try read-another-cluster ls "$OTHER"
# The worker, where it runs apart from the agent (as the shipped units run them): its
# credentials, its codec keys, its process.
[ -z "$WORKER_PID" ] || try read-worker-environ sh -c 'grep -q canary "/proc/$WORKER_PID/environ"'
[ -z "$WORKER_PID" ] || try signal-worker kill -0 "$WORKER_PID"
[ -z "$CODEC_KEYS" ] || try read-codec-keys cat "$CODEC_KEYS"
[ -z "$SECRETS" ] || try read-secrets ls "$SECRETS"
# The Temporal frontend, with whatever credential the member can read: the server's own
# certificates, or the worker's copy of its client key.
[ -z "$FRONTEND" ] || try reach-the-frontend sh -c 'HOME="$CLUSTERFLOW_MEMBER_DIR" TEMPORAL_ADDRESS="$FRONTEND" TEMPORAL_TLS_SERVER_NAME=localhost TEMPORAL_TLS_SERVER_CA_CERT_PATH="$SERVER_TLS/ca.pem" TEMPORAL_TLS_CLIENT_CERT_PATH="$WORKER_TLS/client.pem" TEMPORAL_TLS_CLIENT_KEY_PATH="$WORKER_TLS/client-key.pem" "$CLI" list'
[ -z "$FRONTEND" ] || try read-the-servers-keys cat "$SERVER_TLS/client-key.pem"
# A setuid program could make the script root again, unless no_new_privs holds it.
try gain-privileges-by-exec sh -c '! grep -q "^NoNewPrivs:[[:space:]]*1" /proc/self/status'
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
	hostileMember(t, "--script-user", "nobody")
}

// With --script-uids, each cluster's scripts run as a user of its own: on top of what a
// script user keeps a member from, one cluster's scripts cannot read another's sandbox.
func TestEachClusterRunsAsAUserOfItsOwn(t *testing.T) {
	t.Parallel()
	guard(t)
	hostileMember(t, "--script-uids", "61000-61009")
}

// A root worker told nothing gives each cluster a user of its own, from cfcli.DefaultScriptUIDs.
func TestARootWorkerGivesEachClusterAUserByDefault(t *testing.T) {
	t.Parallel()
	guard(t)
	hostileMember(t)
	// A data folder those users cannot pass through is refused, saying what to do.
	env := []string{"TEMPORAL_ADDRESS=127.0.0.1:1", "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS="}
	res := run(t, env, "worker", "--data", filepath.Join(t.TempDir(), "data"))
	if res.Code != 2 || !strings.Contains(res.Stderr, "chmod o+x it, or run scripts as root with --allow-root-scripts") {
		t.Errorf("a root worker on a folder script users cannot reach: %s", res)
	}
}

// hostileMember runs the hostile script on a root worker started with flags, and checks
// that every attempt is refused and that the member's sandbox is its user's alone.
func hostileMember(t *testing.T, flags ...string) {
	t.Helper()
	perCluster := len(flags) == 0 || flags[0] == "--script-uids"
	if os.Geteuid() != 0 {
		t.Fatal("script users need the tests to run as root, as CI does")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	data := scriptUserData(t)
	s := newServerStack(t)
	env := append(slices.Clone(s.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=")
	s.startWith(testenv.StartIn, "", env, "worker", 1, "Worker starting", append([]string{"worker", "--data", data}, flags...)...)

	// A first cluster starts the agent, whose PID the hostile script is handed.
	dir := t.TempDir()
	script := filepath.Join(dir, "hostile.sh")
	if err := os.WriteFile(script, []byte(hostileScript), 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(data, "agent")
	// A root-only file the hostile members link to from their logs: the host must neither
	// show it as their output nor write their output into it.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("root's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := func(name string) string {
		pid, _ := os.ReadFile(filepath.Join(agentDir, "agent.pid"))
		other := ""
		if perCluster {
			other = ", OTHER: " + filepath.Join(clusterDir(data, "warmup"), "warmup-m-0")
		}
		p := filepath.Join(dir, name+".yaml")
		body := "name: " + name + "\nroles:\n  - {name: m, members: 2, startscript: " + script + ", env: {AGENT_DIR: " + agentDir +
			", AGENT_PID: \"" + strings.TrimSpace(string(pid)) + "\", AGENT_SOCKET: " + agent.SocketPath(agentDir) + ", VICTIM: " + victim + other + "}}\n"
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
	if perCluster {
		// Users are kept by cluster folder, NAME@HOME.
		uids := map[string]int{}
		data, err := os.ReadFile(filepath.Join(agentDir, "script-uids.json"))
		byName := map[string]int{}
		if err != nil || json.Unmarshal(data, &uids) != nil {
			t.Fatalf("the clusters' users: %s, %v", data, err)
		}
		for key, uid := range uids {
			name, _, _ := strings.Cut(key, "@")
			byName[name] = uid
		}
		if len(byName) != 2 || byName["hostile"] == byName["warmup"] || !inDefaultRange(t, byName["hostile"]) {
			t.Fatalf("the clusters' users: %s; want two of %s", data, cfcli.DefaultScriptUIDs)
		}
		uid = byName["hostile"]
	}
	refused, leaked := 0, 0
	for _, m := range []string{"hostile-m-0", "hostile-m-1"} {
		sandbox := filepath.Join(clusterDir(data, "hostile"), m)
		r, l := hostileTries(t, sandbox)
		refused, leaked = refused+r, leaked+l
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
	want := 7
	if perCluster {
		want = 8 // another cluster's sandbox too
	}
	if refused != 2*want {
		t.Errorf("%d refusals, want %d for each of 2 members", refused, want)
	}
	if st := s.status("hostile"); st.Phase != workflows.PhaseReady {
		t.Errorf("hostile cluster %s", st.Phase)
	}
	// The links each member planted: one read by `logs`, one written by the teardown.
	if res := s.cli("logs", "hostile", "hostile-m-0", "--event", "start"); strings.Contains(res.Stdout+res.Stderr, "root's own") {
		t.Errorf("the host showed the file a member's log links to: %s", res)
		leaked++
	} else {
		refused++
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
	if got, _ := os.ReadFile(victim); string(got) != "root's own\n" {
		t.Errorf("the host wrote a member's teardown output through its link: %q", got)
		leaked += 2
	} else {
		refused += 2
	}
	// bench/hostile.sh reports this line.
	t.Logf("hostile actions: %d tried, %d refused, %d leaked", refused+leaked, refused, leaked)
	if perCluster {
		// A deleted cluster's user is free again.
		if left, err := os.ReadFile(filepath.Join(agentDir, "script-uids.json")); err != nil || strings.TrimSpace(string(left)) != "{}" {
			t.Errorf("script users after the deletes: %s, %v; want none", left, err)
		}
	}
}

// hostileTries counts what the hostile script in a sandbox tried: refused and leaked.
func hostileTries(t *testing.T, sandbox string) (refused, leaked int) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(sandbox, "hostile.log"))
	if err != nil || !strings.HasSuffix(string(log), "done\n") {
		t.Fatalf("%s's hostile script did not finish: %q, %v", filepath.Base(sandbox), log, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		switch {
		case strings.HasSuffix(line, " refused"):
			refused++
		case strings.HasSuffix(line, " leaked"):
			leaked++
			t.Errorf("%s: %s", filepath.Base(sandbox), line)
		}
	}
	return refused, leaked
}

// Upgrading a root worker that ran scripts as root: its clusters carry on, each member's
// sandbox, with what its app wrote there, becoming its cluster's user's at its next event.
func TestARootWorkerUpgradedToScriptUsersKeepsItsClusters(t *testing.T) {
	t.Parallel()
	guard(t)
	data := scriptUserData(t)
	s := newServerStack(t)
	dir := t.TempDir()
	// Each event appends to a file the app keeps in its sandbox: as root before the
	// upgrade, as the cluster's user after.
	script := filepath.Join(dir, "app.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$CLUSTERFLOW_EVENT $(id -u)\" >> \"$CLUSTERFLOW_MEMBER_DIR/app.log\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(specFile, []byte("name: kept\nroles:\n  - {name: w, members: 1, startscript: "+script+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := s.startWith(testenv.StartIn, "", append(slices.Clone(s.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=1"), "worker", 1, "Worker starting", "worker", "--data", data)
	if res := s.cli("deploy", "-f", specFile, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	if code, err := old.Signal(syscall.SIGTERM, 45*time.Second); err != nil {
		t.Fatalf("stop the old worker: %d %v", code, err)
	}
	s.startWith(testenv.StartIn, "", append(slices.Clone(s.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS="), "worker", 2, "Worker starting", "worker", "--data", data)
	if res := s.cli("resize", "kept", "w=2", "--wait"); res.Code != 0 {
		t.Fatalf("resize after the upgrade: %s", res)
	}
	log, err := os.ReadFile(filepath.Join(clusterDir(data, "kept"), "kept-w-0", "app.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	first, _ := defaultScriptUIDs(t)
	if len(lines) != 2 || lines[0] != "configure 0" || !strings.HasPrefix(lines[1], "addnodes ") || lines[1] == "addnodes 0" {
		t.Errorf("kept-w-0's app log: %q; want its configure as root, then its addnodes as the cluster's user", lines)
	}
	info, err := os.Stat(filepath.Join(clusterDir(data, "kept"), "kept-w-0", "app.log"))
	if err != nil || int(info.Sys().(*syscall.Stat_t).Uid) < first {
		t.Errorf("the app's file was not given to the cluster's user: %v", err)
	}
	if res := s.cli("delete", "kept", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// scriptUserData is a data folder script users may pass through, which a test's temporary
// folder (0700) is not; it and what runs from it go when the test ends.
func scriptUserData(t *testing.T) string {
	t.Helper()
	data := sharedDir(t, "cf-scriptuser-", 0o711)
	testenv.StopAllAtEnd(t, data)
	return data
}

// sharedDir is a folder other users pass through (mode 0711) or read (0755), as /run and
// /usr/local/bin are, where a test's own temporary folder is root's alone; it goes when the
// test ends.
func sharedDir(t *testing.T, prefix string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// defaultScriptUIDs is the range a root worker gives clusters users from when told none.
func defaultScriptUIDs(t *testing.T) (first, last int) {
	t.Helper()
	lo, hi, ok := strings.Cut(cfcli.DefaultScriptUIDs, "-")
	first, err1 := strconv.Atoi(lo)
	last, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("cfcli.DefaultScriptUIDs %q", cfcli.DefaultScriptUIDs)
	}
	return first, last
}

// inDefaultRange says uid is of the default range of script users.
func inDefaultRange(t *testing.T, uid int) bool {
	first, last := defaultScriptUIDs(t)
	return uid >= first && uid <= last
}
