package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
)

// TestRecordHistories records real histories for the replay tests in
// workflows/testdata/GENERATION. Run it when workflow code changes on purpose (behind
// workflow.GetVersion), naming a new generation so the older histories keep being replayed:
//
//	CLUSTERFLOW_RECORD_HISTORIES=v4-something go test ./internal/e2e -run TestRecordHistories
func TestRecordHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	record := func(scenario, cluster string) {
		recordOn(server.Client, scenario, workflows.ClusterWorkflowID(cluster))
	}

	specPath, _ := writeCluster(t, threeLevelSpec("rec-ok", ""))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "delete", "rec-ok", "--wait")
	record("deploy-then-delete", "rec-ok")

	specPath, _ = writeCluster(t, threeLevelSpec("rec-failed", "rec-failed-worker-1"))
	if res := cli(t, "deploy", "-f", specPath, "--wait"); res.Code != 1 {
		t.Fatalf("deploy should fail: %s", res)
	}
	mustSucceed(t, "delete", "rec-failed", "--wait")
	record("failed-deploy", "rec-failed")

	specPath, trace := writeCluster(t, `
name: rec-midway
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE, SLEEP: "60"}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath)
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	mustSucceed(t, "delete", "rec-midway", "--wait")
	record("delete-mid-setup", "rec-midway")

	// A resize while the controller's configure holds, a grow and a shrink with their
	// notifications, a cancel, and a continue-as-new after every operation.
	specPath, trace = writeCluster(t, resizableSpec("rec-resize"))
	hold := trace + ".hold-controller"
	holdOn(t, hold)
	mustSucceed(t, "deploy", "-f", specPath, "--continue-as-new-every", "1")
	waitFor(t, "the controller's configure to start", func() bool { return len(readTrace(t, trace)) > 0 })
	mustSucceed(t, "resize", "rec-resize", "worker=3")
	release(t, hold)
	mustSucceed(t, "status", "rec-resize", "--wait")
	mustSucceed(t, "resize", "rec-resize", "worker=4", "--wait")
	mustSucceed(t, "resize", "rec-resize", "worker=1", "--wait")
	hold = trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "resize", "rec-resize", "worker=2")
	waitFor(t, "the new worker's configure to start", func() bool { return len(runsOf(readTrace(t, trace), "", "configure")) == 6 })
	mustSucceed(t, "cancel", "rec-resize", "--wait")
	release(t, hold)
	mustSucceed(t, "delete", "rec-resize", "--wait")
	record("resize-during-deploy-then-grow-shrink-cancel", "rec-resize")

	// Members no longer wanted are stopped midway.
	shrinkDuringSetup(t, "rec-shrink-midway")
	mustSucceed(t, "delete", "rec-shrink-midway", "--wait")
	record("shrink-during-setup", "rec-shrink-midway")

	// Members added to a role while it configures start at once.
	growDuringSetup(t, "rec-grow-midway")
	mustSucceed(t, "delete", "rec-grow-midway", "--wait")
	record("grow-during-setup", "rec-grow-midway")

	// Member health: a replacement after replaceAfter, down and up, gone, a meltdown and a
	// resume, an orphan found by reconcile, with periodic reconciles and continue-as-new.
	n := "rec-health"
	specPath, _ = writeCluster(t, strings.Replace(healthSpec(n, "3s"), "roles:", "reconcileEvery: 2s\nroles:", 1))
	mustSucceed(t, "deploy", "-f", specPath, "--wait", "--continue-as-new-every", "2")
	mustSucceed(t, "signal", n, n+"-worker-1", "down")
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-2=ready<"+n+"-worker-1")
	mustSucceed(t, "signal", n, n+"-worker-0", "down")
	mustSucceed(t, "signal", n, n+"-worker-0", "up")
	mustSucceed(t, "signal", n, n+"-worker-0", "gone")
	waitForWorkers(t, n, n+"-worker-2=ready<"+n+"-worker-1", n+"-worker-3=ready<"+n+"-worker-0")
	mustSucceed(t, "signal", n, n+"-worker-2", "gone")
	mustSucceed(t, "signal", n, n+"-worker-3", "gone")
	mustSucceed(t, "resume", n)
	waitForWorkers(t, n, n+"-worker-4=ready<"+n+"-worker-2", n+"-worker-5=ready<"+n+"-worker-3")
	if err := os.MkdirAll(filepath.Join(clusterDir(dataDir, n), n+"-worker-9"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, "reconcile", n)
	waitFor(t, "the orphan to go", func() bool { return !exists(filepath.Join(clusterDir(dataDir, n), n+"-worker-9")) })
	mustSucceed(t, "status", n, "--wait")
	time.Sleep(3 * time.Second) // a periodic reconcile or two
	mustSucceed(t, "delete", n, "--wait")
	record("member-health", n)

	// A failed setup replaced once, by a successor that succeeds.
	n = "rec-config-error"
	specPath, _ = writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: %[1]s-worker-1}, replaceOnConfigError: true, maxReplacements: 1}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "delete", n, "--wait")
	record("replace-on-config-error", n)
}

func mustSucceed(t *testing.T, args ...string) {
	t.Helper()
	if res := cli(t, args...); res.Code != 0 {
		t.Fatalf("clusterflow %v: %s", args, res)
	}
}

// TestRecordHostHistories records, like TestRecordHistories, a cluster placed on three
// hosts that loses one, and the host registry's own history.
func TestRecordHostHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	f := newFleet(t, "h1:zone=a", "h2:zone=a", "h3:zone=b")
	c := f.dial()
	defer c.Close()
	record := func(scenario, workflowID string) { recordOn(c, scenario, workflowID) }
	specPath, _ := writeCluster(t, spreadSpec)
	if res := f.cli("deploy", "-f", specPath, "--wait", "--continue-as-new-every", "2"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	f.killHost("h2")
	waitFor(t, "a replacement on h3", func() bool {
		s := f.status("spread")
		return slices.Contains(placements(s), "spread-worker-2@h3=ready") && s.Phase == workflows.PhaseReady
	})
	f.cli("host", "cordon", "h3")
	if res := f.cli("reconcile", "spread"); res.Code != 0 {
		t.Fatalf("reconcile: %s", res)
	}
	if res := f.cli("delete", "spread", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	record("hosts-loss-and-replacement", workflows.ClusterWorkflowID("spread"))

	// A drain, then a machine restart that starts members (h2 is gone; h3 cordoned).
	f.cli("host", "uncordon", "h3")
	specPath, _ = writeCluster(t, `
name: moved
roles:
  - {name: db, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}, events: [configure, teardown, start]}
  - {name: web, members: 2, dependsOn: [db], startscript: trace.sh, env: {TRACE: TRACE_FILE}, events: [configure, addnodes, delnodes, teardown, start]}
`)
	if res := f.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	if res := f.cli("host", "drain", "h1", "--wait", "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("drain: %s", res)
	}
	f.killHost("h3")
	if err := os.WriteFile(f.hosts["h3"].bootID, []byte("boot-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.startHost("h3")
	waitFor(t, "the members on h3 started", func() bool {
		s := f.status("moved")
		return s.Phase == workflows.PhaseReady && len(s.Role("web").Members) > 0 && s.Role("web").Members[0].Event == "start"
	})
	if res := f.cli("delete", "moved", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	record("drain-and-restart", workflows.ClusterWorkflowID("moved"))

	// A host lost while its members are being set up: they are set up elsewhere at once,
	// and their sandboxes there are removed once the host is back.
	f.cli("host", "uncordon", "h1") // ends its drain
	specPath, trace := writeCluster(t, `
name: midloss
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {hosts: {zone: b}}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold}}
`)
	holdOn(t, trace+".hold")
	if res := f.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the workers' configures to start", func() bool { return len(runsOf(readTrace(t, trace), "midloss-worker", "configure")) == 2 })
	f.killHost("h1")
	f.waitForHosts("h1 lost", func(hs []workflows.HostDocument) bool { return slices.Contains(hostStates(hs), "h1=lost") })
	release(t, trace+".hold")
	waitFor(t, "midloss ready without h1", func() bool {
		s := f.status("midloss")
		return s.Phase == workflows.PhaseReady && !slices.ContainsFunc(placements(s), func(p string) bool { return strings.Contains(p, "@h1=") })
	})
	f.startHost("h1")
	waitFor(t, "the stale sandbox on h1 removed", func() bool {
		entries, _ := os.ReadDir(clusterDir(f.hosts["h1"].data, "midloss"))
		return !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "midloss-") })
	})
	if res := f.cli("delete", "midloss", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	record("host-lost-mid-setup", workflows.ClusterWorkflowID("midloss"))
	record("host-registry", workflows.HostsWorkflowID)
	// The shards keeping the hosts (histories from before shards have none).
	for _, shard := range slices.Compact(slices.Sorted(slices.Values([]int{workflows.HostShard("h1"), workflows.HostShard("h2"), workflows.HostShard("h3")}))) {
		if _, err := c.DescribeWorkflowExecution(context.Background(), workflows.HostShardWorkflowID(shard), ""); err == nil {
			record(fmt.Sprintf("host-registry-shard-%02d", shard), workflows.HostShardWorkflowID(shard))
		}
	}
}

// recorder returns a function that records a workflow's histories (every run and child)
// in workflows/testdata/$CLUSTERFLOW_RECORD_HISTORIES/SCENARIO, or skips the test when that
// variable is unset.
func recorder(t *testing.T) func(c client.Client, scenario, workflowID string) {
	generation := os.Getenv("CLUSTERFLOW_RECORD_HISTORIES")
	if generation == "" {
		t.Skip("set CLUSTERFLOW_RECORD_HISTORIES=GENERATION to record replay histories")
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return func(c client.Client, scenario, workflowID string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dir := filepath.Join(root, "workflows", "testdata", generation, scenario)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		files, err := testenv.ExportHistories(ctx, c, workflowID, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: recorded %d histories", scenario, len(files))
	}
}

// TestRecordBatchHistories records a role wide enough to run as batches: a deploy, a
// shrink that notifies the batches, a failure that halts the other batches, and a delete.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v6-batches go test ./internal/e2e -run TestRecordBatchHistories
func TestRecordBatchHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	specPath, _ := writeCluster(t, `
name: rec-wide
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 255, maxInFlight: 40, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: rec-wide-worker-256}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait", "--timeout", "150s")
	mustSucceed(t, "resize", "rec-wide", "worker=252", "--wait", "--timeout", "150s")
	// One of the grow's first new members fails: the other batch stops too.
	if res := runFor(t, 150*time.Second, "resize", "rec-wide", "worker=600", "--wait", "--timeout", "140s"); res.Code != 1 {
		t.Fatalf("the grow should fail: %s", res)
	}
	mustSucceed(t, "delete", "rec-wide", "--wait", "--timeout", "150s")
	recordOn(server.Client, "wide-role-in-batches", workflows.ClusterWorkflowID("rec-wide"))
}

// TestRecordOneOffHistories records the short workflows the CLI starts for one answer:
// reading a member's output (`logs`) and looking for orphans (`hosts --orphans`).
//
//	CLUSTERFLOW_RECORD_HISTORIES=v7-prompt-failures go test ./internal/e2e -run TestRecordOneOffHistories
func TestRecordOneOffHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	specPath, _ := writeCluster(t, threeLevelSpec("rec-oneoff", ""))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "logs", "rec-oneoff", "rec-oneoff-controller-0", "--event", "configure")
	mustSucceed(t, "hosts", "--orphans")
	mustSucceed(t, "delete", "rec-oneoff", "--wait")
	for scenario, workflowType := range map[string]string{
		"member-logs": workflows.MemberLogWorkflowName,
		"orphans":     workflows.OrphansWorkflowName,
	} {
		var id string
		waitFor(t, "the "+scenario+" workflow in visibility", func() bool {
			id = latestWorkflowID(t, server.Client, workflowType)
			return id != ""
		})
		recordOn(server.Client, scenario, id)
	}
}

// latestWorkflowID finds the newest workflow of a type, or "".
func latestWorkflowID(t *testing.T, c client.Client, workflowType string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = %q", workflowType),
	})
	if err != nil {
		t.Logf("list %s workflows: %v", workflowType, err)
		return ""
	}
	if len(resp.Executions) == 0 {
		return ""
	}
	return resp.Executions[0].Execution.WorkflowId
}

// TestRecordMaintenanceHistories records, on a server of its own (maintenance holds every
// cluster of a server), a deploy that maintenance holds at its next member and that goes on
// when it ends, an export and a retire, and the maintenance flag's own workflow.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v8-maintenance go test ./internal/e2e -run TestRecordMaintenanceHistories
func TestRecordMaintenanceHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	s := newStack(t)
	c := s.dial()
	defer c.Close()
	specPath, trace := writeCluster(t, `
name: rec-held
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 3, maxInFlight: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold}, replaceAfter: 1h}
`)
	holdOn(t, trace+".hold")
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the first worker's configure", func() bool { return len(runsOf(readTrace(t, trace), "rec-held-worker", "configure")) == 1 })
	maintenanceOn(s, "recording")
	release(t, trace+".hold")
	s.waitForStatus("rec-held", "the deploy held", func(st workflows.ClusterStatus) bool {
		return strings.Contains(st.Message, "is held and resumes") && st.Role("worker").Ready == 1
	})
	// A plain signal is recorded in the member's history, not acted on.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.SignalWorkflow(ctx, workflows.ClusterWorkflowID("rec-held"), "", workflows.MemberEventSignal,
		workflows.MemberEvent{Member: "rec-held-worker-0", Event: workflows.HealthDown, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	s.waitForStatus("rec-held", "the held event recorded", func(st workflows.ClusterStatus) bool {
		h := st.Role("worker").Member("rec-held-worker-0").Health
		return h != nil && len(h.Transitions) == 1
	})
	maintenanceOff(s)
	s.waitForStatus("rec-held", "ready", func(st workflows.ClusterStatus) bool { return st.Phase == workflows.PhaseReady })
	maintenanceOn(s, "moving")
	if res := s.cli("export", "rec-held", "-o", filepath.Join(t.TempDir(), "export.json")); res.Code != 0 {
		t.Fatalf("export: %s", res)
	}
	if res := s.cli("export", "--retire", "rec-held"); res.Code != 0 {
		t.Fatalf("retire: %s", res)
	}
	maintenanceOff(s)
	recordOn(c, "held-exported-retired", workflows.ClusterWorkflowID("rec-held"))
	recordOn(c, "maintenance-flag", workflows.MaintenanceWorkflowID)
}

// TestRecordFleetHistories records a cluster on more hosts than it writes to or lists
// itself (hosts.InChildren), on a fleet of simulated hosts: its files are written by
// writing children (change.WritingInChildren) and a reconcile lists them in a listing
// child (change.ListingInChildren).
//
//	CLUSTERFLOW_RECORD_HISTORIES=v24-hosts-in-children go test ./internal/e2e -run TestRecordFleetHistories
func TestRecordFleetHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	s := newServerStack(t)
	s.startWorker()
	const fleet, members = 120, hosts.InChildren + 5
	if err := simulate(t, s, "sim", "sim", fleet, time.Minute).WaitFor("Simulating hosts", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, time.Minute, time.Second, "the hosts ready", func() (bool, string) {
		return hostsIn(fleetHosts(t, s), workflows.HostReady, fleet)
	})
	specPath, _ := writeCluster(t, fmt.Sprintf(`
name: rec-fleet
roles:
  - {name: worker, members: %d, maxInFlight: %d, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}}
`, members, members))
	if res := s.cli("deploy", "-f", specPath, "--wait", "--timeout", "90s"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	if res := s.cli("reconcile", "rec-fleet"); res.Code != 0 || !strings.Contains(res.Stdout, fmt.Sprintf("The backend has %d member sandboxes", members)) {
		t.Fatalf("reconcile: %s", res)
	}
	if res := s.cli("delete", "rec-fleet", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	c := s.dial()
	defer c.Close()
	recordOn(c, "deploy-reconcile-delete", workflows.ClusterWorkflowID("rec-fleet"))
}

// TestRecordCodecHistories records, like TestRecordHistories, a cluster whose every payload
// is encrypted (workflows/testdata/codec-test.keys): the replay test reads them with that
// key, as a worker with the codec does.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v11-codec go test ./internal/e2e -run TestRecordCodecHistories
func TestRecordCodecHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	keyLines, err := os.ReadFile(filepath.Join(root, "workflows", "testdata", "codec-test.keys"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServerStack(t)
	keys := filepath.Join(s.dir, "codec.keys")
	if err := os.WriteFile(keys, keyLines, 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = append(s.env, "CLUSTERFLOW_CODEC_KEY_FILE="+keys)
	s.startWorker()
	specPath, _ := writeCluster(t, resizableSpec("rec-codec"))
	for _, args := range [][]string{
		{"deploy", "-f", specPath, "--wait"},
		{"resize", "rec-codec", "worker=3", "--wait"},
		{"resize", "rec-codec", "worker=1", "--wait"},
		{"delete", "rec-codec", "--wait"},
	} {
		if res := s.cli(args...); res.Code != 0 {
			t.Fatalf("clusterflow %v: %s", args, res)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, err := testenv.ClientOptions(s.address)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.DialContext(ctx, co)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recordOn(c, "encrypted-deploy-resize-delete", workflows.ClusterWorkflowID("rec-codec"))
}

// TestRecordSignedHistories records a cluster whose specs are signed, on a host that
// trusts the key: a signed deploy, a signed resize, an unsigned one, and a delete.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v13-signed-specs go test ./internal/e2e -run TestRecordSignedHistories
func TestRecordSignedHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	s := newServerStack(t)
	key := filepath.Join(s.dir, "ops.key")
	res := s.cli("keys", "new", "ops", "--out", key)
	if res.Code != 0 {
		t.Fatalf("keys new: %s", res)
	}
	trusted := filepath.Join(s.dir, "trusted-keys")
	if err := os.WriteFile(trusted, []byte(res.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start("worker", 1, "Worker starting", "worker", "--data", s.data, "--trusted-keys", trusted)
	specPath, _ := writeCluster(t, resizableSpec("rec-signed"))
	for _, args := range [][]string{
		{"deploy", "-f", specPath, "--sign-key", key, "--wait"},
		{"resize", "rec-signed", "worker=3", "--sign-key", key, "--wait"},
		{"resize", "rec-signed", "worker=2", "--wait"},
		{"delete", "rec-signed", "--wait"},
	} {
		if res := s.cli(args...); res.Code != 0 {
			t.Fatalf("clusterflow %v: %s", args, res)
		}
	}
	c := s.dial()
	defer c.Close()
	recordOn(c, "signed-deploy-resize-delete", workflows.ClusterWorkflowID("rec-signed"))
}

// TestRecordRolloutHistories records rollouts: one in place with a resize midway, one
// whose canary fails and is undone, a rolling restart paused by an operator and resumed,
// and an action with parameters.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v16-rollouts go test ./internal/e2e -run TestRecordRolloutHistories
func TestRecordRolloutHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	record := func(scenario, cluster string) {
		recordOn(server.Client, scenario, workflows.ClusterWorkflowID(cluster))
	}
	policy := "canaries: 1, maxInFlight: 2, watch: 1s"

	n := "rec-rollout"
	specPath, trace := writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait", "--continue-as-new-every", "2")
	mustSucceed(t, "apply", "-f", writeSpec(t, specPath, "v2.yaml", rolloutSpec(n, ", VERSION: '2', UPGRADE_SLEEP: '1'", policy)))
	waitFor(t, "the canary's upgrade to start", func() bool { return len(runsOf(readTrace(t, trace), "", "upgrade")) > 0 })
	mustSucceed(t, "resize", n, "worker=5")
	mustSucceed(t, "rollout", "status", n, "--wait", "--timeout", "2m")
	mustSucceed(t, "delete", n, "--wait")
	record("in-place-rollout-with-a-resize", n)

	n = "rec-undo"
	specPath, _ = writeCluster(t, rolloutSpec(n, "", policy))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	bad := writeSpec(t, specPath, "bad.yaml", rolloutSpec(n, fmt.Sprintf(", FAIL_EVENT: upgrade, FAIL_MEMBER: %s-worker-0", n), policy))
	if res := cli(t, "apply", "-f", bad, "--wait"); res.Code == 0 {
		t.Fatalf("the failing canary did not pause the rollout: %s", res)
	}
	mustSucceed(t, "rollout", "undo", n)
	mustSucceed(t, "rollout", "status", n, "--wait", "--timeout", "2m")
	mustSucceed(t, "delete", n, "--wait")
	record("failed-canary-undone", n)

	n = "rec-restart"
	specPath, trace = writeCluster(t, fmt.Sprintf(`
name: %s
roles:
  - name: worker
    members: 4
    startscript: trace.sh
    events: [configure, addnodes, delnodes, teardown, restart]
    actions: [backup]
    env: {TRACE: TRACE_FILE, RESTART_SLEEP: "1"}
    update: {canaries: 1, maxInFlight: 2, watch: 0s}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "restart", n)
	waitFor(t, "the canary's restart to start", func() bool { return len(runsOf(readTrace(t, trace), "", "restart")) > 0 })
	mustSucceed(t, "rollout", "pause", n)
	mustSucceed(t, "rollout", "resume", n)
	mustSucceed(t, "rollout", "status", n, "--wait", "--timeout", "2m")
	mustSucceed(t, "run", n, "backup", "--param", "target=/b", "--parallel", "2", "--wait")
	mustSucceed(t, "delete", n, "--wait")
	record("rolling-restart-paused-resumed-and-an-action", n)

	n = "rec-replace"
	replaceSpec := func(extra string) string {
		return strings.Replace(rolloutSpec(n, extra, policy), "    events: [configure, addnodes, delnodes, teardown, upgrade]\n", "", 1)
	}
	specPath, _ = writeCluster(t, replaceSpec(""))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "apply", "-f", writeSpec(t, specPath, "v2.yaml", replaceSpec(", VERSION: '2'")), "--wait", "--timeout", "3m")
	mustSucceed(t, "delete", n, "--wait")
	record("replace-rollout", n)
}

// TestRecordLifecycleHistories records the lifecycle contract (change.Lifecycle): a failed
// deploy retried, a shrink whose decommission fails then is retried, a grow past a removed
// ordinal and a replacement (addnodes before delnodes) of members with ports, and a delete
// of a member whose addnodes failed, with a teardown that fails.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v17-lifecycle go test ./internal/e2e -run TestRecordLifecycleHistories
func TestRecordLifecycleHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	record := func(scenario, cluster string) {
		recordOn(server.Client, scenario, workflows.ClusterWorkflowID(cluster))
	}

	specPath, trace := writeCluster(t, `
name: rec-retry
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: rec-retry-worker-1, FAIL_WHILE: TRACE_FILE.broken}}
`)
	holdOn(t, trace+".broken")
	if res := cli(t, "deploy", "-f", specPath, "--wait"); res.Code != 1 {
		t.Fatalf("deploy should fail: %s", res)
	}
	release(t, trace+".broken")
	mustSucceed(t, "retry", "rec-retry", "--wait")
	mustSucceed(t, "delete", "rec-retry", "--wait")
	record("retry-after-failed-deploy", "rec-retry")

	specPath, trace = writeCluster(t, `
name: rec-decom
roles:
  - {name: worker, members: 3, replaceAfter: 1s, ports: {client: 2379, peer: 2380}, events: [configure, addnodes, delnodes, decommission, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: decommission, FAIL_MEMBER: rec-decom-worker-2, FAIL_WHILE: TRACE_FILE.broken}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".broken")
	if res := cli(t, "resize", "rec-decom", "worker=1", "--wait"); res.Code != 1 {
		t.Fatalf("the shrink should pause: %s", res)
	}
	release(t, trace+".broken")
	mustSucceed(t, "retry", "rec-decom", "--wait")
	mustSucceed(t, "resize", "rec-decom", "worker=2", "--wait")
	mustSucceed(t, "signal", "rec-decom", "rec-decom-worker-0", "down")
	waitForWorkers(t, "rec-decom", "rec-decom-worker-3=ready", "rec-decom-worker-4=ready<rec-decom-worker-0")
	mustSucceed(t, "delete", "rec-decom", "--wait")
	record("decommission-retry-and-replace", "rec-decom")

	specPath, _ = writeCluster(t, `
name: rec-torn
roles:
  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: rec-torn-worker-0}}
  - {name: edge, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: teardown, FAIL_MEMBER: rec-torn-edge-0}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	if res := cli(t, "resize", "rec-torn", "worker=2", "--wait"); res.Code != 1 {
		t.Fatalf("the resize should fail: %s", res)
	}
	if res := cli(t, "delete", "rec-torn", "--wait"); res.Code != 1 {
		t.Fatalf("the delete should report the failed teardown: %s", res)
	}
	record("delete-after-failed-addnodes", "rec-torn")
}

// TestRecordAppContractHistories records what change.AppContract added: a failed addnodes
// told again by retry, a shrink whose survivors hear removing, a replacement whose
// predecessor stays listed as leaving, and a failed removing that holds the leavers until
// a retry.
func TestRecordAppContractHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	record := func(scenario, cluster string) {
		recordOn(server.Client, scenario, workflows.ClusterWorkflowID(cluster))
	}

	specPath, trace := writeCluster(t, `
name: rec-removing
roles:
  - {name: worker, members: 2, replaceAfter: 1s, events: [configure, decommission, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: admin, members: 1, dependsOn: [worker], events: [configure, addnodes, removing, delnodes], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: rec-removing-admin-0, FAIL_WHILE: TRACE_FILE.broken}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".broken")
	if res := cli(t, "resize", "rec-removing", "worker=3", "--wait"); res.Code != 1 {
		t.Fatalf("the grow should fail its addnodes: %s", res)
	}
	release(t, trace+".broken")
	mustSucceed(t, "retry", "rec-removing", "--wait")
	mustSucceed(t, "resize", "rec-removing", "worker=2", "--wait")
	mustSucceed(t, "signal", "rec-removing", "rec-removing-worker-0", "down")
	waitForWorkers(t, "rec-removing", "rec-removing-worker-1=ready", "rec-removing-worker-3=ready<rec-removing-worker-0")
	mustSucceed(t, "delete", "rec-removing", "--wait")
	record("retold-addnodes-removing-and-replace", "rec-removing")

	specPath, trace = writeCluster(t, `
name: rec-held
roles:
  - {name: worker, members: 3, events: [configure, teardown], startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: admin, members: 1, dependsOn: [worker], events: [configure, addnodes, removing, delnodes], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: removing, FAIL_MEMBER: rec-held-admin-0, FAIL_WHILE: TRACE_FILE.broken}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".broken")
	if res := cli(t, "resize", "rec-held", "worker=2", "--wait"); res.Code != 1 {
		t.Fatalf("the shrink should be held by the failed removing: %s", res)
	}
	release(t, trace+".broken")
	mustSucceed(t, "retry", "rec-held", "--wait")
	mustSucceed(t, "delete", "rec-held", "--wait")
	record("failed-removing-retried", "rec-held")
}

// TestRecordTrustHistories records reports that may only watch (watch-only-reports): a
// down from an events-only gateway token that leaves the member down past replaceAfter,
// then an up, beside a down from a token that may replace, which replaces its member.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v19-trust go test ./internal/e2e -run TestRecordTrustHistories
func TestRecordTrustHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	specPath, _ := writeCluster(t, `
name: rec-watch
roles:
  - {name: worker, members: 3, startscript: trace.sh, env: {TRACE: TRACE_FILE}, replaceAfter: 2s, maxUnavailable: "2", limits: {processes: 256}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := &gatewayUnderTest{}
	var watcher, replacer string
	startGatewayWith(t, g, cliEnv, []gatewayToken{{"watcher", "events", "rec-watch", &watcher}, {"replacer", "events,replace", "rec-watch", &replacer}})
	for _, r := range []struct{ token, member, event string }{{watcher, "rec-watch-worker-0", "down"}, {replacer, "rec-watch-worker-1", "down"}} {
		if code, _, body := g.do(t, "POST", "/v1/clusters/rec-watch/members/"+r.member+"/events", r.token, "application/json", []byte(`{"event":"`+r.event+`"}`)); code != 200 {
			t.Fatalf("%s %s: %d %s", r.event, r.member, code, body)
		}
	}
	waitForWorkers(t, "rec-watch", "rec-watch-worker-0=down", "rec-watch-worker-2=ready", "rec-watch-worker-3=ready<rec-watch-worker-1")
	if code, _, body := g.do(t, "POST", "/v1/clusters/rec-watch/members/rec-watch-worker-0/events", watcher, "application/json", []byte(`{"event":"up"}`)); code != 200 {
		t.Fatalf("up: %d %s", code, body)
	}
	mustSucceed(t, "delete", "rec-watch", "--wait")
	recordOn(server.Client, "watch-only-down-and-replace", workflows.ClusterWorkflowID("rec-watch"))

	// Signed generations (signed-generations): a signed deploy, an unsigned resize whose
	// manifest goes to the host unsigned, a signed resize, an old signature refused.
	key := filepath.Join(t.TempDir(), "ops.key")
	mustSucceed(t, "keys", "new", "ops", "--out", key)
	specPath, _ = writeCluster(t, `
name: rec-signed
roles:
  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}, actions: [restore], actionParams: {restore: {snapshot: "[a-z]+"}}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--sign-key", key, "--wait")
	mustSucceed(t, "resize", "rec-signed", "worker=2", "--wait")
	mustSucceed(t, "resize", "rec-signed", "worker=3", "--sign-key", key, "--wait")
	if res := cli(t, "run", "rec-signed", "restore", "--param", "snapshot=../x"); res.Code == 0 {
		t.Fatalf("a parameter its schema refuses: %s", res)
	}
	mustSucceed(t, "run", "rec-signed", "restore", "--param", "snapshot=nightly", "--wait")
	mustSucceed(t, "delete", "rec-signed", "--wait")
	recordOn(server.Client, "signed-generations", workflows.ClusterWorkflowID("rec-signed"))
}

// TestRecordProbeHistories records members checked by their own hosts: a ready-after
// configure, a killed service taken down by its checks and replaced, and a delete.
//
//	CLUSTERFLOW_RECORD_HISTORIES=v22-probes go test ./internal/e2e -run TestRecordProbeHistories
func TestRecordProbeHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	n := "rec-probe"
	specPath, _ := writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: svc, members: 3, startscript: service.sh, env: {TRACE: TRACE_FILE, READY_AFTER: "1"}, events: [configure, addnodes, delnodes, teardown, check], probe: {every: 1s, failures: 2, readyAfter: true, readyTimeout: 30s}, replaceAfter: 2s}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	if err := syscall.Kill(readPID(t, memberFile(n, n+"-svc-1", "service.pid")), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed service's member replaced", func() bool {
		return slices.Equal(memberStates(statusJSON(t, n), "svc"), []string{n + "-svc-0=ready", n + "-svc-2=ready", n + "-svc-3=ready"})
	})
	mustSucceed(t, "delete", n, "--wait")
	recordOn(server.Client, "probe-down-replaced", workflows.ClusterWorkflowID(n))

	// An operator's false alarm on a member whose check keeps passing: it comes up by its
	// checks (change.RecheckDown).
	n = "rec-falsealarm"
	specPath, _ = writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: svc, members: 2, startscript: service.sh, env: {TRACE: TRACE_FILE}, events: [configure, teardown, check], probe: {every: 1s, successes: 2}, replaceAfter: 10m}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "signal", n, n+"-svc-0", "down", "--reason", "a false alarm")
	waitFor(t, "the member down by the operator up by its checks", func() bool {
		s := statusJSON(t, n)
		m := s.Role("svc").Member(n + "-svc-0")
		return m.State == workflows.MemberReady && len(m.Health.Transitions) > 0 && m.Health.Transitions[len(m.Health.Transitions)-1].Source == workflows.ProbeSource
	})
	mustSucceed(t, "delete", n, "--wait")
	recordOn(server.Client, "operator-down-up-by-checks", workflows.ClusterWorkflowID(n))
}

// TestRecordRemoveHistories records a resize that names the member to take away
// (change.RemoveNamed), and a look at one member on its host (status --member):
//
//	CLUSTERFLOW_RECORD_HISTORIES=v29-remove-named go test ./internal/e2e -run TestRecordRemoveHistories
func TestRecordRemoveHistories(t *testing.T) {
	guard(t)
	recordOn := recorder(t)
	n := "rec-remove"
	specPath, _ := writeCluster(t, threeLevelSpec(n, ""))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "resize", n, "--remove", n+"-worker-0", "--wait")
	mustSucceed(t, "status", n, "--member", n+"-worker-1")
	mustSucceed(t, "delete", n, "--wait")
	recordOn(server.Client, "resize-remove-named-then-delete", workflows.ClusterWorkflowID(n))
	var id string
	waitFor(t, "the member's describe workflow in visibility", func() bool {
		id = latestWorkflowID(t, server.Client, workflows.MemberDescribeWorkflowName)
		return id != ""
	})
	recordOn(server.Client, "describe-member", id)
}
