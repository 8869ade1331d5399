package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// The host as it is shipped: the agent and the worker started the way the systemd units
// say (each unit's user, capability bounding set and no_new_privs, as setpriv applies them,
// and its ExecStart), and the same for the image's entrypoint with the capabilities the
// compose file grants. A hostile member of each of two clusters tries everything that would
// let it act as the host, the worker or the other cluster; nothing may leak.

// shippedHost is where a test runs a host as shipped: the folders the units name, made in
// temporary folders, and the users they run as.
type shippedHost struct {
	data, run, secrets, etc string
	// worker is the unprivileged user the worker runs as: clusterflow if the machine has
	// one, else a number no one has.
	workerUID, workerGID int
	workerUser           string
	bin                  string
	codecKeys            string
}

func newShippedHost(t *testing.T) *shippedHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the shipped host runs its agent as root, so this test needs root, as CI has")
	}
	worker := testenv.ImageWorkerUID
	h := &shippedHost{data: scriptUserData(t), workerUID: worker, workerGID: worker, workerUser: strconv.Itoa(worker)}
	if u, err := user.Lookup("clusterflow"); err == nil {
		h.workerUID, _ = strconv.Atoi(u.Uid)
		h.workerGID, _ = strconv.Atoi(u.Gid)
		h.workerUser = "clusterflow"
	} else if _, err := user.LookupId(h.workerUser); err == nil {
		t.Fatalf("uid %d, which this test gives the worker, is taken on this machine", worker)
	}
	// Folders others pass through (the worker to its socket and binary).
	shared := func(prefix string) string { return sharedDir(t, prefix, 0o755) }
	h.run, h.etc = shared("cf-run-"), shared("cf-etc-")
	h.secrets = filepath.Join(h.etc, "secrets")
	if err := os.Mkdir(h.secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	host, err := testenv.HostBinary()
	if err != nil {
		t.Fatal(err)
	}
	h.bin = filepath.Join(shared("cf-bin-"), "clusterflow-host")
	if out, err := exec.Command("cp", host, h.bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the host binary: %v\n%s", err, out)
	}
	// The worker's codec keys: its user's alone, as the unit says.
	h.codecKeys = filepath.Join(h.etc, "codec.keys")
	writeKeyFile(t, h.codecKeys, newKeyLine(t, "shipped"))
	if err := os.Chown(h.codecKeys, h.workerUID, h.workerGID); err != nil {
		t.Fatal(err)
	}
	return h
}

// paths maps what the units name to this host's folders.
func (h *shippedHost) paths() *strings.Replacer {
	return strings.NewReplacer("/usr/local/bin/clusterflow-host", h.bin, "/var/lib/clusterflow", h.data,
		"/run/clusterflow", h.run, "/etc/clusterflow/secrets", h.secrets, "--worker-user clusterflow", "--worker-user "+h.workerUser,
		"%H", "shipped-1", "${CLUSTERFLOW_LABELS}", "zone=a", "${CLUSTERFLOW_ADDRESS}", "127.0.0.1")
}

// unitService reads the [Service] section of a shipped unit: each key's values in order,
// continued lines joined.
func unitService(t *testing.T, name string) map[string][]string {
	t.Helper()
	text := strings.ReplaceAll(readRepoFile(t, "deploy/systemd/"+name), "\\\n", " ")
	_, service, ok := strings.Cut(text, "\n[Service]\n")
	if !ok {
		t.Fatalf("%s has no [Service] section", name)
	}
	service, _, _ = strings.Cut(service, "\n[")
	keys := map[string][]string{}
	for _, line := range strings.Split(service, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = append(keys[k], strings.Join(strings.Fields(v), " "))
		}
	}
	return keys
}

// setprivFor is how setpriv starts a process as the unit says: as its user (with no
// supplementary group), with its capability bounding set, no inheritable or ambient
// capability, and no_new_privs. It refuses a unit that says what this cannot apply.
func (h *shippedHost) setprivFor(t *testing.T, unit map[string][]string) []string {
	t.Helper()
	args := []string{"setpriv"}
	switch u := strings.Join(unit["User"], ""); u {
	case "", "root":
	case "clusterflow":
		args = append(args, "--reuid", strconv.Itoa(h.workerUID), "--regid", strconv.Itoa(h.workerGID), "--clear-groups")
	default:
		t.Fatalf("a unit runs as %q, which this test does not know", u)
	}
	bounding := "-all"
	for _, c := range strings.Fields(strings.Join(unit["CapabilityBoundingSet"], " ")) {
		bounding += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	if strings.Join(unit["AmbientCapabilities"], "") != "" {
		t.Fatalf("a unit gives ambient capabilities %v, which this test does not apply", unit["AmbientCapabilities"])
	}
	args = append(args, "--bounding-set", bounding, "--inh-caps", "-all", "--ambient-caps", "-all")
	if slices.Contains(unit["NoNewPrivileges"], "yes") {
		args = append(args, "--no-new-privs")
	}
	return append(args, "--")
}

// start runs command with exactly env (as systemd gives a unit none of its own), after
// umask, and waits for ready.
func (h *shippedHost) start(t *testing.T, logDir, name, umask string, env, command []string, ready string) *testenv.Process {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", "umask " + umask + " && exec \"$@\"", "sh"}, command...)...)
	cmd.Dir, cmd.Env = "/", append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	p, err := testenv.StartCommand(cmd, logDir, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitFor(ready, time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// workerEnv is what worker.env gives the worker: the server and its client certificate,
// and a secret of the worker's own (a canary a member must not read) beside the codec
// keys' file.
func (h *shippedHost) workerEnv(s *stack) []string {
	return append(h.tlsEnv(s), "CLUSTERFLOW_CODEC_KEY_FILE="+h.codecKeys, "TEMPORAL_CLIENT_CANARY=canary-of-the-worker", "HOME=/")
}

// tlsEnv is the stack's environment with the client certificate of its server, as the
// operator gives it to the worker: files of the worker's user alone, in a folder of theirs.
func (h *shippedHost) tlsEnv(s *stack) []string {
	dir := filepath.Join(h.etc, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	env := slices.Clone(s.env)
	for _, f := range []struct{ name, variable string }{
		{"client.pem", "TEMPORAL_TLS_CLIENT_CERT_PATH"}, {"client-key.pem", "TEMPORAL_TLS_CLIENT_KEY_PATH"}, {"ca.pem", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
	} {
		data, err := os.ReadFile(filepath.Join(s.dir, "tls", f.name))
		if err != nil {
			s.t.Fatal(err)
		}
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Chown(path, h.workerUID, h.workerGID); err != nil {
			s.t.Fatal(err)
		}
		env = append(env, f.variable+"="+path)
	}
	if err := os.Chown(dir, h.workerUID, h.workerGID); err != nil {
		s.t.Fatal(err)
	}
	return append(env, "TEMPORAL_TLS_SERVER_NAME=localhost")
}

// TestTheShippedUnitsKeepMembersFromTheHostAndEachOther starts the agent and the worker as
// the systemd units say and runs a hostile member in each of two clusters against them.
func TestTheShippedUnitsKeepMembersFromTheHostAndEachOther(t *testing.T) {
	t.Parallel()
	guard(t)
	h := newShippedHost(t)
	s := newServerStack(t)
	agentPID, workerPID := h.startUnits(t, s)
	h.hostileAgainst(t, s, agentPID, workerPID, filepath.Join(h.run, "agent.sock"))
}

// startUnits starts the agent and the worker as the systemd units say, and returns their
// PIDs.
func (h *shippedHost) startUnits(t *testing.T, s *stack) (agentPID, workerPID int) {
	t.Helper()
	agentUnit, workerUnit := unitService(t, "clusterflow-agent.service"), unitService(t, "clusterflow-worker.service")
	exe := func(unit map[string][]string) []string {
		return strings.Fields(h.paths().Replace(strings.Join(unit["ExecStart"], " ")))
	}
	umask := func(unit map[string][]string) string {
		if u := strings.Join(unit["UMask"], ""); u != "" {
			return u
		}
		return "0022"
	}
	agentProc := h.start(t, s.dir, "agent", umask(agentUnit), nil, append(h.setprivFor(t, agentUnit), exe(agentUnit)...), "Agent serving")
	worker := h.start(t, s.dir, "worker", umask(workerUnit), h.workerEnv(s), append(h.setprivFor(t, workerUnit), exe(workerUnit)...), "Worker starting")
	return agentProc.Pid(), worker.Pid()
}

// TestTheImageKeepsMembersFromTheHostAndEachOther runs the image's entrypoint as its
// container would (root, with only the capabilities the compose file grants the hosts),
// and the same hostile members against it.
func TestTheImageKeepsMembersFromTheHostAndEachOther(t *testing.T) {
	t.Parallel()
	guard(t)
	h := newShippedHost(t)
	s := newServerStack(t)
	service := readCompose(t).Services["clusterflow-host-1"]
	if len(service.CapAdd) == 0 {
		t.Fatal("the compose file grants its hosts no capabilities: cap_drop ALL and cap_add what the agent needs")
	}
	unit := map[string][]string{"CapabilityBoundingSet": {strings.Join(service.CapAdd, " ")}}
	if slices.Contains(service.SecurityOpt, "no-new-privileges:true") {
		unit["NoNewPrivileges"] = []string{"yes"}
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := append(h.workerEnv(s), "CLUSTERFLOW_BIN="+h.bin, "CLUSTERFLOW_DATA="+h.data, "CLUSTERFLOW_RUN="+h.run,
		"CLUSTERFLOW_SECRETS="+h.secrets, "CLUSTERFLOW_WORKER_USER="+h.workerUser)
	entry := append(h.setprivFor(t, unit), "/bin/sh", filepath.Join(root, "deploy/docker/host.sh"), "--host", "image-1", "--labels", "zone=a", "--host-address", "127.0.0.1")
	host := h.start(t, s.dir, "image", "0022", env, entry, "Worker starting")
	// The entrypoint starts the agent and the worker side by side: the worker may be up first.
	var pid int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var ok bool
		if pid, ok = testenv.AgentPID(h.data); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's entrypoint started no agent within a minute:\n%s", host.Output())
		}
	}
	worker := workerOf(t, host.Pid())
	h.hostileAgainst(t, s, pid, worker, filepath.Join(h.run, "agent.sock"))
}

// workerOf is the worker the entrypoint started, checked to run as a user, not root.
func workerOf(t *testing.T, entrypoint int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^PPid:\s+%d$`, entrypoint)).Match(status) || !strings.Contains(string(cmdline), "\x00worker\x00") {
			continue
		}
		if uid := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindSubmatch(status); uid == nil || string(uid[1]) == "0" {
			t.Fatalf("the image's worker runs as root:\n%s", status)
		}
		pid, _ := strconv.Atoi(e.Name())
		return pid
	}
	t.Fatal("the image's entrypoint started no worker")
	return 0
}

// hostileAgainst deploys two clusters of hostile members on the host and counts what they
// tried: every try refused, two clusters under two users, and each cluster's processes
// gone with it.
func (h *shippedHost) hostileAgainst(t *testing.T, s *stack, agentPID, workerPID int, socket string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "hostile.sh")
	if err := os.WriteFile(script, []byte(hostileScript), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("root's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clone(s.env), "CLUSTERFLOW_CODEC_KEY_FILE="+h.codecKeys)
	agentDir := filepath.Join(h.data, "agent")
	deploy := func(name, other string) {
		vars := map[string]string{"AGENT_DIR": agentDir, "AGENT_PID": strconv.Itoa(agentPID), "AGENT_SOCKET": socket, "VICTIM": victim,
			"WORKER_PID": strconv.Itoa(workerPID), "CODEC_KEYS": h.codecKeys, "SECRETS": h.secrets, "OTHER": other,
			"FRONTEND": s.address, "CLI": h.bin, "SERVER_TLS": filepath.Join(s.dir, "tls"), "WORKER_TLS": filepath.Join(h.etc, "tls")}
		encoded, _ := json.Marshal(vars)
		body := fmt.Sprintf("name: %s\nroles:\n  - {name: m, members: 2, startscript: %s, env: %s}\n", name, script, encoded)
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if res := run(t, env, "deploy", "-f", file, "--wait"); res.Code != 0 {
			t.Fatalf("deploy %s: %s", name, res)
		}
	}
	deploy("warmup", "")
	deploy("hostile", filepath.Join(clusterDir(h.data, "warmup"), "warmup-m-0"))
	refused, leaked := 0, 0
	for _, m := range []string{"hostile-m-0", "hostile-m-1"} {
		r, l := hostileTries(t, filepath.Join(clusterDir(h.data, "hostile"), m))
		refused, leaked = refused+r, leaked+l
	}
	// 7 of a root worker's, the worker's environment and signals, its codec keys, the
	// secrets folder, the Temporal frontend and its keys, and privileges by exec: for each
	// of 2 members.
	if want := 2 * 14; refused+leaked != want {
		t.Errorf("%d tries, want %d", refused+leaked, want)
	}
	var uids map[string]int
	data, err := os.ReadFile(filepath.Join(agentDir, "script-uids.json"))
	if err != nil || json.Unmarshal(data, &uids) != nil || len(uids) != 2 {
		t.Fatalf("the clusters' users: %s, %v; want one for each of two clusters", data, err)
	}
	seen := map[int]bool{}
	for key, uid := range uids {
		if seen[uid] || uid == h.workerUID || uid == 0 {
			t.Errorf("cluster %s runs as %d: %v", key, uid, uids)
		}
		seen[uid] = true
	}
	if st := statusWith(t, env, "hostile"); st.Phase != workflows.PhaseReady {
		t.Errorf("hostile cluster %s", st.Phase)
	}
	for _, n := range []string{"warmup", "hostile"} {
		if res := run(t, env, "delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
	// A delete kills its cluster's processes as it removes the cluster's folder; the last of
	// them may take a moment to exit after the delete returns.
	uidsSeen := slices.Collect(maps.Keys(seen))
	procs := processesOf(uidsSeen)
	for deadline := time.Now().Add(10 * time.Second); len(procs) > 0 && time.Now().Before(deadline); procs = processesOf(uidsSeen) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(procs) > 0 {
		t.Errorf("processes of the deleted clusters' users are left 10 s after their delete: %v", procs)
	}
	// bench/hostile.sh reports this line.
	t.Logf("hostile actions in the shipped host: %d tried, %d refused, %d leaked", refused+leaked, refused, leaked)
}

// statusWith reads a cluster's status through the CLI with env.
func statusWith(t *testing.T, env []string, name string) workflows.ClusterStatus {
	t.Helper()
	res := run(t, env, "status", name, "-o", "json")
	var st workflows.ClusterStatus
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &st) != nil {
		t.Fatalf("status %s: %s", name, res)
	}
	return st
}

// processesOf lists the running processes whose real user is one of uids.
func processesOf(uids []int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || regexp.MustCompile(`(?m)^State:\s+Z`).Match(status) {
			continue
		}
		if m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindSubmatch(status); m != nil {
			if uid, _ := strconv.Atoi(string(m[1])); slices.Contains(uids, uid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// A worker that is not root and is given no agent to call would start one as itself, whose
// scripts could then read its credentials: it refuses to start, saying why and what to do,
// unless told that is meant (--shared-script-user).
func TestANonRootWorkerWithoutAnAgentRefusesToStart(t *testing.T) {
	t.Parallel()
	guard(t)
	h := newShippedHost(t)
	data := filepath.Join(h.run, "data")
	as := []string{"setpriv", "--reuid", strconv.Itoa(h.workerUID), "--regid", strconv.Itoa(h.workerGID), "--clear-groups", "--", h.bin}
	worker := func(flags ...string) testenv.Result {
		t.Helper()
		cmd := append(append(slices.Clone(as), "worker", "--data", data), flags...)
		res, err := testenv.RunBinary(t.Context(), cmd[0], h.run, []string{"TEMPORAL_ADDRESS=127.0.0.1:1", "HOME=/"}, cmd[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if err := os.Chown(h.run, h.workerUID, h.workerGID); err != nil {
		t.Fatal(err)
	}
	res := worker()
	if res.Code != 2 || !strings.Contains(res.Stderr, "not root") || !strings.Contains(res.Stderr, "--agent-socket") || !strings.Contains(res.Stderr, "--shared-script-user") {
		t.Errorf("a non-root worker with no agent: %s; want exit 2 naming --agent-socket and --shared-script-user", res)
	}
	// Told so, it goes on, to connect (to nothing here).
	if res := worker("--shared-script-user"); strings.Contains(res.Stderr, "not root") {
		t.Errorf("with --shared-script-user: %s", res)
	}
}

// Without script users, a cluster's processes are still found by what they cannot erase:
// an agent that is not root (--shared-script-user) makes its members' cgroups below the
// cgroup it was given (delegated, as systemd's Delegate=yes gives one), so daemons that
// left their session and hid their environment (as Redis does for its process title) end
// with their member and their cluster.
func TestANonRootHostsDaemonsDieWithTheirMember(t *testing.T) {
	t.Parallel()
	guard(t)
	h := newShippedHost(t)
	mount := runner.Cgroup2Mount()
	if mount == "" {
		t.Fatal("cgroup2 is not mounted here")
	}
	given := filepath.Join(mount, fmt.Sprintf("cf-test-%d", os.Getpid())+strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.Mkdir(given, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.KillCgroup(given, 10*time.Second) })
	// Delegation: the folder and the files that move processes in it are the user's.
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(given, f), h.workerUID, h.workerGID); err != nil {
			t.Fatal(err)
		}
	}
	s := newServerStack(t)
	data, pids := filepath.Join(h.run, "data"), filepath.Join(h.run, "pids")
	for _, d := range []string{data, pids} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, h.workerUID, h.workerGID); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StopAllAtEnd(t, data)
	worker := append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, given},
		"setpriv", "--reuid", strconv.Itoa(h.workerUID), "--regid", strconv.Itoa(h.workerGID), "--clear-groups", "--",
		h.bin, "worker", "--data", data, "--shared-script-user")
	h.start(t, s.dir, "worker", "0022", append(h.tlsEnv(s), "HOME=/"), worker, "Worker starting")
	dir := t.TempDir()
	script := filepath.Join(dir, "daemons.sh")
	if err := os.WriteFile(script, []byte(hiddenDaemonsScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "cluster.yaml")
	n := "nonroot"
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf("name: %s\nroles:\n  - {name: m, members: 2, startscript: %s, env: {PIDS: %q}}\n", n, script, pids)), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	kept, removed := daemonsOf(t, pids, n+"-m-0"), daemonsOf(t, pids, n+"-m-1")
	t.Cleanup(func() {
		for _, pid := range append(kept, removed...) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, pid := range append(slices.Clone(kept), removed...) {
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if !strings.Contains(string(cg), strings.TrimPrefix(given, mount)+"/clusterflow/") {
			t.Errorf("daemon %d is not in a member's cgroup below the one given: %s", pid, cg)
		}
	}
	if res := s.cli("resize", n, "m=1", "--wait"); res.Code != 0 {
		t.Fatalf("resize: %s", res)
	}
	waitFor(t, "the removed member's daemons to end", func() bool { return !running(removed[0]) && !running(removed[1]) })
	for _, pid := range kept {
		if !running(pid) {
			t.Errorf("daemon %d of the member that stays was killed by the shrink", pid)
		}
	}
	if res := s.cli("delete", n, "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	waitFor(t, "every daemon to end with the cluster", func() bool { return !running(kept[0]) && !running(kept[1]) })
}
