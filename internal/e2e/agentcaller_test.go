package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// The agent trusts no caller: a worker of another user (the shipped, unprivileged worker
// beside a root agent) that turns against it gets nothing run as root, and no file read
// that it names. The test binary itself, run as the worker's user, is that worker.

// agentCallerEnv, set, makes the test binary the hostile worker (agentCaller) rather than
// the tests: its value is the callerOrders as JSON.
const agentCallerEnv = "CLUSTERFLOW_TEST_AGENT_CALLER"

// callerOrders say what the hostile worker tries.
type callerOrders struct {
	Socket string `json:"socket"`
	// Owner is the namespace ID the host's worker serves; Member and Script (its hash) a
	// member of a cluster the host runs and its installed startscript.
	Owner, Cluster, Home, Member, Script string
	// ForgedScript is the startscript of the cluster the hostile worker makes itself.
	ForgedScript string `json:"forgedScript"`
	// RootOnly is a file only root may read.
	RootOnly string `json:"rootOnly"`
}

// agentCaller is the hostile worker: it tries each of its orders against the agent and
// prints what each one got, as JSON, try by try.
func agentCaller(ordersJSON string) int {
	var o callerOrders
	if err := json.Unmarshal([]byte(ordersJSON), &o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := &agent.Client{Dir: filepath.Dir(o.Socket), Socket: o.Socket}
	report := map[string]string{}
	outcome := func(name string, err error) {
		report[name] = "ok"
		if err != nil {
			report[name] = err.Error()
		}
	}
	// A bare launch of the cluster's installed script, naming no user: as root, if taken.
	_, err := client.Launch(ctx, agent.Launch{
		Key: agent.Key{WorkflowID: "hostile", ActivityID: "1"}, TaskToken: []byte("hostile"),
		Cluster: o.Cluster, Home: o.Home, Member: o.Member, Event: "configure",
		Script: agent.Script{SHA256: o.Script}, Timeout: time.Minute,
	})
	outcome("bare-launch", err)
	_, err = client.Stop(ctx, agent.Stop{WorkflowID: "hostile", Member: o.Member, Event: "configure"})
	outcome("bare-stop", err)
	w := agent.Worker{Owner: o.Owner, Namespace: "default"}
	named := w
	named.Connection = agent.Connection{ClientConfigProfile: envconfig.ClientConfigProfile{
		Address: "127.0.0.1:1", TLS: &envconfig.ClientConfigTLS{ClientKeyPath: o.RootOnly, ClientCertPath: o.RootOnly},
	}}
	_, err = (&agent.RemoteBackend{Client: client, Worker: named}).ListClusters(ctx)
	outcome("connection-naming-a-root-file", err)
	nameless := w
	nameless.Owner = ""
	_, err = (&agent.RemoteBackend{Client: client, Worker: nameless}).ListClusters(ctx)
	outcome("call-without-owner", err)
	// A cluster of its own making, through the backend's calls: its script runs as that
	// cluster's own user, never root.
	remote := &agent.RemoteBackend{Client: client, Worker: w}
	hash := spec.ContentHash([]byte(o.ForgedScript))
	forged := backend.MemberRef{Cluster: "forged", Role: "m", Name: "forged-m-0"}
	err = remote.WriteClusterFiles(ctx, backend.ClusterFiles{Cluster: "forged", Scripts: map[string]string{hash: o.ForgedScript}})
	if err == nil {
		err = remote.CreateMember(ctx, forged)
	}
	if err == nil {
		err = remote.LaunchScript(ctx, backend.ScriptRun{Member: forged, Event: spec.EventConfigure, ScriptHash: hash, Timeout: time.Minute},
			backend.Completion{WorkflowID: "forged", ActivityID: "1", TaskToken: []byte("forged")})
	}
	outcome("forged-cluster-launch", err)
	if err := json.NewEncoder(os.Stdout).Encode(report); err != nil {
		return 1
	}
	return 0
}

// TestTheAgentTakesNothingFromAWorkerOfAnotherUser runs the host as the units say and, as
// the worker's user, asks its agent for what would make that user root or have root read
// for it: every such request is refused, and the one script it may have run (through the
// backend's calls, for a cluster of its own) runs as that cluster's user.
func TestTheAgentTakesNothingFromAWorkerOfAnotherUser(t *testing.T) {
	t.Parallel()
	guard(t)
	h := newShippedHost(t)
	s := newServerStack(t)
	h.startUnits(t, s)
	socket := filepath.Join(h.run, "agent.sock")

	// Every script of the host says who it runs as, in a file any user may append to.
	uids := filepath.Join(h.run, "uids")
	if err := os.WriteFile(uids, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(uids, 0o666); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$CLUSTERFLOW_CLUSTER $CLUSTERFLOW_EVENT $(id -u)\" >> " + uids + "\n"
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "own.yaml")
	if err := os.WriteFile(specPath, []byte("name: own\nroles:\n  - {name: m, members: 1, startscript: "+scriptPath+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clone(s.env), "CLUSTERFLOW_CODEC_KEY_FILE="+h.codecKeys)
	if res := run(t, env, "deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	own := clusterDir(h.data, "own")
	owner, err := os.ReadFile(filepath.Join(own, ".clusterflow", "owner"))
	if err != nil {
		t.Fatal(err)
	}
	rootOnly := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(rootOnly, []byte("root's alone\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name, home, _ := strings.Cut(filepath.Base(own), "@")
	orders, _ := json.Marshal(callerOrders{
		Socket: socket, Owner: strings.TrimSpace(string(owner)), Cluster: name, Home: home, Member: "own-m-0",
		Script: spec.ContentHash([]byte(script)), ForgedScript: script, RootOnly: rootOnly,
	})
	report := h.asWorker(t, string(orders))
	for try, want := range map[string]string{
		"bare-launch":                   "only through its backend's calls",
		"bare-stop":                     "only through its backend's calls",
		"connection-naming-a-root-file": "the agent reads no file a caller names",
		"call-without-owner":            "names no owner",
		"forged-cluster-launch":         "ok",
	} {
		if got := report[try]; !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", try, got, want)
		}
	}
	// What ran, ran as a cluster's own user: the bare launch ran nothing.
	waitFor(t, "the forged cluster's script to run", func() bool {
		data, _ := os.ReadFile(uids)
		return strings.Contains(string(data), "forged configure ")
	})
	data, _ := os.ReadFile(uids)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Errorf("scripts run: %q; want own's configure and the forged cluster's, once each", lines)
	}
	seen := map[int]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		uid, err := strconv.Atoi(f[len(f)-1])
		if err != nil || uid == 0 || uid == h.workerUID || seen[uid] {
			t.Errorf("a script ran as %d: %q; want each cluster's own user", uid, line)
		}
		seen[uid] = true
	}
	if st := statusWith(t, env, "own"); st.Phase != workflows.PhaseReady {
		t.Errorf("the host's own cluster: %s", st.Phase)
	}
	if res := run(t, env, "delete", "own", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// asWorker runs the test binary as the worker's user, as the hostile worker of orders, and
// returns its report.
func (h *shippedHost) asWorker(t *testing.T, orders string) map[string]string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Where the worker's user may run it from: the test binary's own folder is root's.
	bin := filepath.Join(h.run, "hostile-worker")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid", strconv.Itoa(h.workerUID), "--regid", strconv.Itoa(h.workerGID), "--clear-groups", "--", bin)
	cmd.Dir, cmd.Env = h.run, []string{agentCallerEnv + "=" + orders, "PATH=/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("the hostile worker: %v\n%s", err, stderr.String())
	}
	var report map[string]string
	if err := json.Unmarshal(stdout, &report); err != nil {
		t.Fatalf("the hostile worker's report %q: %v\n%s", stdout, err, stderr.String())
	}
	return report
}
