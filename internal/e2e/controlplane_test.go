package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// networkHostileScript tries, as a member, every control endpoint of the dev it runs on:
// the Temporal frontend through the CLI (list, and delete another cluster), what holds the
// credentials (the client key, dev's client profiles, the UI's secret), the Web UI (a page,
// and the terminate of another cluster, with the CSRF cookie the UI hands out), Temporal's
// HTTP API, the health gateway and the codec server. It writes, for each, whether it was
// refused or it leaked.
const networkHostileScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
out="$CLUSTERFLOW_MEMBER_DIR/network.log"
jar="$CLUSTERFLOW_MEMBER_DIR/cookies"
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name leaked" >> "$out"; else echo "$name refused" >> "$out"; fi; }
# With whatever of dev's credentials the member could read.
export TEMPORAL_ADDRESS="$FRONTEND" HOME="$CLUSTERFLOW_MEMBER_DIR" TEMPORAL_TLS_SERVER_NAME=localhost \
  TEMPORAL_TLS_CLIENT_CERT_PATH="$STATE/tls/client.pem" TEMPORAL_TLS_CLIENT_KEY_PATH="$STATE/tls/client-key.pem" TEMPORAL_TLS_SERVER_CA_CERT_PATH="$STATE/tls/ca.pem"
session="clusterflow-session=$(cat "$STATE/ui-token" 2>/dev/null)"
try cli-list "$CLI" list
try cli-delete-another "$CLI" delete "$VICTIM"
try read-client-key cat "$STATE/tls/client-key.pem"
try read-dev-profile sh -c 'cat "$PROFILES"/*.toml'
try read-ui-secret cat "$STATE/ui-token"
try ui-page curl -sf -m 10 -b "$session" "http://$UI/namespaces/default/workflows"
try ui-terminate-another sh -c 'curl -sf -m 10 -b "$2" -c "$1" "http://$UI/" >/dev/null; csrf=$(awk "/_csrf/ {print \$7}" "$1"); curl -sf -m 10 -b "$2; _csrf=$csrf" -X POST -H "X-CSRF-Token: $csrf" -H "Content-Type: application/json" -d "{\"reason\":\"hostile\"}" "http://$UI/api/v1/namespaces/default/workflows/cluster%2F$VICTIM/terminate"' sh "$jar" "$session"
try http-api curl -sfk -m 10 --cert "$STATE/tls/client.pem" --key "$STATE/tls/client-key.pem" "https://$HTTP_API/api/v1/namespaces/default/workflows"
try http-api-plain curl -sf -m 10 "http://$HTTP_API/api/v1/namespaces/default/workflows"
try gateway curl -sf -m 10 -H "Authorization: Bearer $(cat "$STATE/gateway-token" 2>/dev/null)" "http://$GATEWAY/v1/clusters/$VICTIM"
try codec-decode curl -sf -m 10 -b "$session" -X POST -H "Content-Type: application/json" -d '{"payloads":[]}' "http://$CODEC/default/decode"
echo done >> "$out"
`

// TestAMemberReachesNoControlEndpointOfDev runs dev as root, as the README's first command
// does on a fresh machine, and a hostile member beside another cluster: every control
// endpoint refuses it, and the other cluster stays ready. dev as root gives each cluster a
// user of its own without being told.
func TestAMemberReachesNoControlEndpointOfDev(t *testing.T) {
	t.Parallel()
	guard(t)
	if os.Geteuid() != 0 {
		t.Fatal("dev gives clusters users of their own as root: this test needs root, as CI has")
	}
	dir := t.TempDir()
	data := scriptUserData(t)
	cliCopy := sharedCLI(t)
	frontend, ui, gateway, codec := freeAddress(t), freeAddress(t), freeAddress(t), freeAddress(t)
	keys := filepath.Join(dir, "codec.keys")
	writeKeyFile(t, keys, newKeyLine(t, "dev"))
	p, err := testenv.Start(dir, dir, "dev", []string{"CLUSTERFLOW_ALLOW_ROOT_SCRIPTS="}, "dev", "--db", filepath.Join(dir, "dev.db"), "--data", data,
		"--address", frontend, "--ui-address", ui, "--gateway-address", gateway, "--codec-key-file", keys, "--codec-address", codec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitFor("Ready.", time.Minute); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
	m := regexp.MustCompile(`Temporal HTTP API serving.*"address": "([0-9.:]+)"`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("dev's log does not say where Temporal's HTTP API is:\n%s", log)
	}
	profiles := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "clusterflow", "dev")
	env := []string{"TEMPORAL_ADDRESS=" + frontend, "CLUSTERFLOW_CODEC_KEY_FILE=" + keys}
	victim := "victim"
	deploy := func(name, script, vars string) {
		t.Helper()
		deployScripted(t, func(args ...string) testenv.Result { return run(t, env, args...) }, name, script, vars, p.Output)
	}
	// The other cluster's user is a user of the system: named, with a home, as its
	// scripts are told.
	deploy(victim, "#!/bin/sh\necho \"$(id -un) $USER $LOGNAME $(getent passwd \"$(id -u)\" | cut -d: -f1)\" > who\n", "")
	deploy("hostile", networkHostileScript, fmt.Sprintf("CLI: %q, FRONTEND: %q, VICTIM: %q, STATE: %q, PROFILES: %q, UI: %q, HTTP_API: %q, GATEWAY: %q, CODEC: %q",
		cliCopy, frontend, victim, dir, profiles, ui, string(m[1]), gateway, codec))

	refused, leaked := hostileTriesOf(t, filepath.Join(clusterDir(data, "hostile"), "hostile-m-0", "network.log"), "a member of dev reached a control endpoint", 11)
	st := statusWith(t, env, victim)
	if st.Phase != workflows.PhaseReady {
		t.Errorf("the other cluster is %s after the hostile member's tries", st.Phase)
	}
	uid := fileUID(t, filepath.Join(clusterDir(data, "hostile"), "hostile-m-0"))
	if uid == 0 {
		t.Error("dev as root ran the hostile member as root")
	}
	victimDir := filepath.Join(clusterDir(data, victim), victim+"-m-0")
	who, _ := os.ReadFile(filepath.Join(victimDir, "who"))
	name := fmt.Sprintf("clusterflow-%d", fileUID(t, victimDir))
	if want := strings.Repeat(name+" ", 3) + name; strings.TrimSpace(string(who)) != want {
		t.Errorf("the other cluster's script ran as %q (id -un, USER, LOGNAME, getent passwd); want %q", strings.TrimSpace(string(who)), want)
	}
	// bench/hostile.sh reports this line.
	t.Logf("hostile member's tries at dev's control endpoints: %d tried, %d refused, %d leaked", refused+leaked, refused, leaked)
	for _, n := range []string{victim, "hostile"} {
		if res := run(t, env, "delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
}

// fileUID is the owner of a file.
func fileUID(t *testing.T, path string) uint32 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Uid
}

// A worker whose members run as users of their own, connected to a server that demands
// nothing of it, says at start that any member reaching the server acts on every cluster.
func TestAWorkerSaysLoudlyWhenTemporalDemandsNoCredential(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	data := scriptUserData(t)
	w, err := testenv.Start(dir, dir, "worker", append(slices.Clone(cliEnv), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS="),
		"worker", "--data", data, "--task-queue", "loud-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if err := w.WaitFor("Worker starting", time.Minute); err != nil {
		t.Fatal(err)
	}
	if out := w.Output(); !strings.Contains(out, "Connected to Temporal with no credential") || !strings.Contains(out, "can act on every cluster") {
		t.Errorf("the worker did not warn of a server that demands no credential:\n%s", out)
	}
}

// composeHostileScript tries, as a member of a host of the compose stack, to reach the
// frontend: through the CLI with the host's certificate (list, and delete another cluster),
// by reading every key the certificate job made, without a client certificate, in the
// clear, and with a certificate of a CA of its own making.
const composeHostileScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
out="$CLUSTERFLOW_MEMBER_DIR/network.log"
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name leaked" >> "$out"; else echo "$name refused" >> "$out"; fi; }
export TEMPORAL_ADDRESS="$FRONTEND" HOME="$CLUSTERFLOW_MEMBER_DIR"
hosts() {
  TEMPORAL_TLS_CLIENT_CERT_PATH="$VOLUMES/temporal-tls-hosts/client.pem" TEMPORAL_TLS_CLIENT_KEY_PATH="$VOLUMES/temporal-tls-hosts/client-key.pem" \
  TEMPORAL_TLS_SERVER_CA_CERT_PATH="$VOLUMES/temporal-tls-hosts/ca.pem" TEMPORAL_TLS_SERVER_NAME=temporal "$@"
}
try cli-list-as-the-host hosts "$CLI" list
try cli-delete-another-as-the-host hosts "$CLI" delete "$VICTIM"
for key in temporal-ca/ca-key.pem temporal-tls-server/server-key.pem temporal-tls-control/client-key.pem temporal-tls-hosts/client-key.pem temporal-tls/client-key.pem; do
  try "read-$key" cat "$VOLUMES/$key"
done
try cli-list-without-a-certificate env TEMPORAL_TLS=true TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=true "$CLI" list
try cli-list-in-the-clear "$CLI" list
"$CLI" certs --ca-dir "$HOME/ca" --server "$HOME/server=$(id -u)" --client "$HOME/mine=$(id -u)" >/dev/null 2>&1
try cli-list-with-its-own-ca env TEMPORAL_TLS_CLIENT_CERT_PATH="$HOME/mine/client.pem" TEMPORAL_TLS_CLIENT_KEY_PATH="$HOME/mine/client-key.pem" \
  TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=true "$CLI" list
echo done >> "$out"
`

// The compose stack as its file says, without Docker (testenv.ProductionServer): its
// certificate job, its Temporal server demanding a client certificate, and a worker that
// reaches it as the compose file's hosts do, giving each cluster a user of its own. A
// hostile member beside another cluster tries the frontend every way it has; every try is
// refused, the other cluster stays ready, and the worker does not warn of a server that
// demands nothing.
func TestAMemberReachesNoControlEndpointOfTheComposeStack(t *testing.T) {
	t.Parallel()
	guard(t)
	if os.Geteuid() != 0 {
		t.Fatal("members run as users of their own as root: this test needs root, as CI has")
	}
	s := newProductionStack(t)
	data := scriptUserData(t)
	worker := s.startWith(testenv.StartIn, "", append(slices.Clone(s.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS="), "worker", 1, "Worker starting", "worker", "--data", data)
	cliCopy := sharedCLI(t)
	victim := "victim"
	deploy := func(name, script, vars string) {
		t.Helper()
		deployScripted(t, s.cli, name, script, vars, worker.Output)
	}
	deploy(victim, "#!/bin/sh\n", "")
	deploy("hostile", composeHostileScript, fmt.Sprintf("CLI: %q, FRONTEND: %q, VICTIM: %q, VOLUMES: %q", cliCopy, s.address, victim, filepath.Join(s.dir, "volumes")))

	member := filepath.Join(clusterDir(data, "hostile"), "hostile-m-0")
	refused, leaked := hostileTriesOf(t, filepath.Join(member, "network.log"), "a member of the compose stack reached the frontend", 10)
	// Its own CA's certificate was made: the server refused it for its CA, not for lack of it.
	if _, err := os.Stat(filepath.Join(member, "mine", "client.pem")); err != nil {
		t.Errorf("the member made no certificate of its own CA to try: %v", err)
	}
	if fileUID(t, member) == 0 {
		t.Error("the hostile member ran as root")
	}
	if st := statusWith(t, s.env, victim); st.Phase != workflows.PhaseReady {
		t.Errorf("the other cluster is %s after the hostile member's tries", st.Phase)
	}
	if strings.Contains(worker.Output(), "Connected to Temporal with no credential") {
		t.Errorf("the worker says the compose stack's server demanded no credential:\n%s", worker.Output())
	}
	// The operator, as the compose file's header says: the three paths into ./temporal-tls,
	// the frontend at 127.0.0.1, no server name.
	operator := filepath.Join(s.dir, "volumes", "temporal-tls")
	if res := run(t, []string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_TLS_CLIENT_CERT_PATH=" + filepath.Join(operator, "client.pem"),
		"TEMPORAL_TLS_CLIENT_KEY_PATH=" + filepath.Join(operator, "client-key.pem"), "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + filepath.Join(operator, "ca.pem"),
	}, "list"); res.Code != 0 || !strings.Contains(res.Stdout, victim) {
		t.Errorf("the operator's certificate, as the compose file says to use it: %s", res)
	}
	// bench/hostile.sh reports this line.
	t.Logf("hostile member's tries at the compose stack's frontend: %d tried, %d refused, %d leaked", refused+leaked, refused, leaked)
	for _, n := range []string{victim, "hostile"} {
		if res := s.cli("delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
}

// deployScripted deploys a cluster of one member running script, with vars (a YAML flow
// mapping's body) as its env, through cli, and waits for it to be ready; on failure it
// shows what more() says (the server's or worker's output).
func deployScripted(t *testing.T, cli func(args ...string) testenv.Result, name, script, vars string, more func() string) {
	t.Helper()
	specDir := t.TempDir()
	path := filepath.Join(specDir, "s.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(specDir, name+".yaml")
	body := fmt.Sprintf("name: %s\nroles:\n  - {name: m, members: 1, startscript: %s, env: {%s}}\n", name, path, vars)
	if err := os.WriteFile(specPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy %s: %s\n%s", name, res, more())
	}
}

// hostileTriesOf reads a hostile member's log (a "NAME refused" or "NAME leaked" line per
// try, then "done"), reports each leak as what says, and checks that it made want tries.
func hostileTriesOf(t *testing.T, log, what string, want int) (refused, leaked int) {
	t.Helper()
	out, err := os.ReadFile(log)
	if err != nil || !strings.HasSuffix(string(out), "done\n") {
		t.Fatalf("the hostile member did not finish its tries: %q, %v", out, err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(strings.TrimSpace(string(out)), "done"), "\n") {
		switch {
		case strings.HasSuffix(line, " refused"):
			refused++
		case strings.HasSuffix(line, " leaked"):
			leaked++
			t.Errorf("%s: %s", what, line)
		}
	}
	if refused+leaked != want {
		t.Errorf("%d tries, want %d:\n%s", refused+leaked, want, out)
	}
	return refused, leaked
}

// sharedCLI is a copy of the clusterflow binary that members, as users of their own, may
// run: the test's own is in a folder of root's.
func sharedCLI(t *testing.T) string {
	t.Helper()
	bin, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cliCopy := filepath.Join(sharedDir(t, "cf-bin-", 0o755), "clusterflow")
	if out, err := exec.Command("cp", bin, cliCopy).CombinedOutput(); err != nil {
		t.Fatalf("copy the CLI: %v\n%s", err, out)
	}
	return cliCopy
}
