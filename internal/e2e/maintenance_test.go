package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// Maintenance is fleet-wide, so these tests run their own servers: on the shared one it
// would hold every other test's clusters.

// maintenanceOn turns maintenance on with a reason and checks it says so.
func maintenanceOn(s *stack, reason string) {
	s.t.Helper()
	if res := s.cli("maintenance", "on", "--reason", reason); res.Code != 0 || !strings.Contains(res.Stdout, "Maintenance is on since") {
		s.t.Fatalf("maintenance on: %s", res)
	}
}

func maintenanceOff(s *stack) {
	s.t.Helper()
	if res := s.cli("maintenance", "off"); res.Code != 0 || !strings.Contains(res.Stdout, "Maintenance is off") {
		s.t.Fatalf("maintenance off: %s", res)
	}
}

func (s *stack) waitForStatus(name, what string, cond func(workflows.ClusterStatus) bool) workflows.ClusterStatus {
	s.t.Helper()
	var status workflows.ClusterStatus
	waitFor(s.t, name+": "+what, func() bool {
		status = s.status(name)
		return cond(status)
	})
	return status
}

// currentDetails is what the Web UI shows as a workflow's current details.
func currentDetails(t *testing.T, s *stack, workflowID string) string {
	t.Helper()
	c := s.dial()
	defer c.Close()
	return currentDetailsOf(t, c, workflowID)
}

// staticSummary is the summary a workflow was started with, which the Web UI shows at its top.
func staticSummary(t *testing.T, s *stack, workflowID string) string {
	t.Helper()
	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", workflowID, err)
	}
	var summary string
	if err := converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary); err != nil {
		t.Fatalf("the summary of %s: %v", workflowID, err)
	}
	return summary
}

// currentDetailsOf asks c for a workflow's current details.
func currentDetailsOf(t *testing.T, c client.Client, workflowID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The SDK's built-in query, which the Web UI asks too.
	resp, err := c.QueryWorkflow(ctx, workflowID, "", "__temporal_workflow_metadata")
	var meta sdkpb.WorkflowMetadata
	if err == nil {
		err = resp.Get(&meta)
	}
	if err != nil {
		t.Fatalf("the workflow's metadata: %v", err)
	}
	return meta.GetCurrentDetails()
}

func TestMaintenanceHoldsARunningDeployAndRefusesEveryChange(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	n := "held"
	specPath, trace := writeCluster(t, `
name: held
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 3, maxInFlight: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: TRACE_FILE.hold}}
`)
	holdOn(t, trace+".hold")
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitFor(t, "the first worker's configure", func() bool { return len(runsOf(readTrace(t, trace), n+"-worker", "configure")) == 1 })
	maintenanceOn(s, "test move")
	release(t, trace+".hold")

	// The running member finishes, and no other starts: the deploy is held.
	status := s.waitForStatus(n, "the deploy held, its running member done", func(st workflows.ClusterStatus) bool {
		return strings.Contains(st.Message, "is held and resumes when maintenance ends") && st.Role("worker").Ready == 1
	})
	if status.Phase != workflows.PhaseMaintenance || !strings.Contains(status.Message, "test move") || status.Maintenance == nil {
		t.Errorf("held deploy: phase %s (%s)", status.Phase, status.Message)
	}
	if runs := runsOf(readTrace(t, trace), n+"-worker", "configure"); len(runs) != 1 {
		t.Errorf("members started in maintenance: %+v", runs)
	}
	if list := s.cli("list"); !strings.Contains(list.Stdout, "maintenance") {
		t.Errorf("list does not show the maintenance phase:\n%s", list)
	}
	if details := currentDetails(t, s, workflows.ClusterWorkflowID(n)); !strings.HasPrefix(details, "maintenance: maintenance is on since") || !strings.Contains(details, "test move") {
		t.Errorf("the Web UI's current details: %q", details)
	}

	// Every change is refused, naming the maintenance, and writes nothing to the history.
	other, _ := writeCluster(t, `
name: other
roles:
  - {name: worker, members: 1, startscript: trace.sh}
`)
	before := len(s.history(workflows.ClusterWorkflowID(n)))
	for _, args := range [][]string{
		{"resize", n, "worker=4"},
		{"apply", "-f", specPath},
		{"cancel", n},
		{"signal", n, n + "-worker-0", "down"},
		{"resume", n},
		{"reconcile", n},
		{"deploy", "-f", other},
		{"host", "drain", "h1"},
	} {
		res := s.cli(args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, "refused: maintenance is on since") || !strings.Contains(res.Stderr, "test move") {
			t.Errorf("%v in maintenance: %s", args, res)
		}
	}
	// Over HTTP too: 503 with Retry-After, so that Alertmanager sends again after it.
	g := startGateway(t, s.env)
	code, header, body := g.do(t, "POST", "/v1/clusters/held/members/held-worker-0/events", g.events, "application/json", []byte(`{"event":"down"}`))
	if code != 503 || header.Get("Retry-After") == "" || !strings.Contains(body, "maintenance is on since") {
		t.Errorf("an event over HTTP in maintenance: %d %s", code, body)
	}
	code, header, body = g.do(t, "POST", "/v1/alertmanager", g.events, "application/json",
		[]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"clusterflow_cluster":"held","clusterflow_member":"held-worker-0"}}]}`))
	if code != 503 || header.Get("Retry-After") == "" || !strings.Contains(body, "maintenance is on since") {
		t.Errorf("an Alertmanager notification in maintenance: %d %s", code, body)
	}
	if after := len(s.history(workflows.ClusterWorkflowID(n))); after != before {
		t.Errorf("the refusals wrote %d events to the history", after-before)
	}
	if res := s.cli("status", "other"); res.Code != 2 {
		t.Errorf("the refused deploy started a cluster: %s", res)
	}

	maintenanceOff(s)
	status = s.waitForStatus(n, "ready", func(st workflows.ClusterStatus) bool { return st.Phase == workflows.PhaseReady })
	if status.Maintenance != nil || status.Role("worker").Ready != 3 {
		t.Errorf("after maintenance: %+v", status)
	}
	runs := readTrace(t, trace)
	expectRuns(t, runs, "configure", "", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2")

	// A delete still runs in maintenance.
	maintenanceOn(s, "test delete")
	if res := s.cli("delete", n, "--wait"); res.Code != 0 {
		t.Fatalf("delete in maintenance: %s", res)
	}
	expectRuns(t, readTrace(t, trace), "teardown", "", n+"-controller-0", n+"-worker-0", n+"-worker-1", n+"-worker-2")
}

// newDevWithHosts is `clusterflow dev --hosts 2` on SQLite, the user's first server: its
// members are placed on host-1 and host-2, each with its own sandboxes and agent.
func newDevWithHosts(t *testing.T) *stack {
	dir := t.TempDir()
	s := &stack{t: t, dir: dir, data: filepath.Join(dir, "data"), db: filepath.Join(dir, "dev.db"), address: freeAddress(t)}
	s.env = []string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_NAMESPACE=default"}
	s.serve = func(n int) *testenv.Process {
		return s.start("dev", n, "Ready.", "dev", "--hosts", "2", "--no-ui", "--no-gateway", "--db", s.db, "--data", s.data, "--address", s.address)
	}
	for _, h := range []string{"host-1", "host-2"} {
		testenv.StopAllAtEnd(t, s.hostData(h))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dev's logs:\n%s", tailOfFiles(filepath.Join(dir, "dev-*.stderr"), filepath.Join(dir, "hosts", "*", "agent", "agent.log")))
		}
	})
	s.startDev()
	return s
}

// hostData is the data folder of one of dev's hosts.
func (s *stack) hostData(host string) string {
	return filepath.Join(filepath.Dir(s.data), "hosts", host)
}

func TestExportAndImportMoveLiveClustersFromDevToPostgres(t *testing.T) {
	t.Parallel()
	guard(t)
	src := newDevWithHosts(t)
	moverSpec, moverTrace := writeCluster(t, healthSpec("mover", "40s"))
	stayerSpec, stayerTrace := writeCluster(t, `
name: stayer
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}}
`)
	for _, spec := range []string{moverSpec, stayerSpec} {
		if res := src.cli("deploy", "-f", spec, "--wait"); res.Code != 0 {
			t.Fatalf("deploy: %s", res)
		}
	}
	if res := src.cli("signal", "mover", "mover-worker-1", "down", "--reason", "disk full"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	moverBefore := src.status("mover")
	down := moverBefore.Role("worker").Member("mover-worker-1")
	if down.State != workflows.MemberDown || down.Health == nil || down.Health.Due.IsZero() || down.Host == "" {
		t.Fatalf("mover-worker-1 is not down on a host with a deadline: %+v", down)
	}
	due := down.Health.Due
	stayerBefore := src.status("stayer")

	// Exported in maintenance, twice, to the same bytes.
	maintenanceOn(src, "moving to the production server")
	ranBefore := len(readTrace(t, moverTrace)) + len(readTrace(t, stayerTrace))
	dir := t.TempDir()
	file, again := filepath.Join(dir, "clusters.json"), filepath.Join(dir, "again.json")
	for _, f := range []string{file, again} {
		if res := src.cli("export", "--all", "-o", f); res.Code != 0 {
			t.Fatalf("export: %s", res)
		}
	}
	data, _ := os.ReadFile(file)
	if second, _ := os.ReadFile(again); string(second) != string(data) {
		t.Error("two exports of the same state differ")
	}
	var export workflows.ExportFile
	if err := json.Unmarshal(data, &export); err != nil || export.Format != "clusterflow/v1" || len(export.Clusters) != 2 ||
		export.Clusters[0].Name != "mover" || !export.Clusters[0].InMaintenance || len(export.Clusters[0].Spec.Scripts) != 1 {
		t.Fatalf("export: %v\n%s", err, data)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the export holds scripts and env; its mode: %v %v", info.Mode(), err)
	}

	// The target: Temporal on PostgreSQL, and a worker for each host over the same
	// sandboxes and agents.
	dst := newProductionStack(t)
	for i, h := range []string{"host-1", "host-2"} {
		dst.startWith(testenv.StartHost, "", dst.env, "host-"+h, i+1, "Worker starting",
			"worker", "--host", h, "--host-address", "127.0.0.1", "--data", src.hostData(h))
	}
	waitFor(t, "both hosts ready on the target", func() bool {
		res := dst.cli("hosts")
		return strings.Count(res.Stdout, "ready") == 2
	})
	if res := dst.cli("import", "-f", file); res.Code != 2 || !strings.Contains(res.Stderr, "maintenance is off on this server") {
		t.Errorf("import outside maintenance: %s", res)
	}
	if res := dst.cli("import", "-f", file, "--dry-run"); res.Code != 0 || !strings.Contains(res.Stdout, "Maintenance is off on this server") ||
		!strings.Contains(res.Stdout, "Would import cluster stayer") {
		t.Errorf("import --dry-run outside maintenance: %s", res)
	}
	maintenanceOn(dst, "adopting")
	unknownHost := export
	unknownHost.Clusters = slices.Clone(export.Clusters)
	stayerState := unknownHost.Clusters[1].Carried.State
	stayerState.Roles = slices.Clone(stayerState.Roles)
	stayerState.Roles[0].Members = slices.Clone(stayerState.Roles[0].Members)
	stayerState.Roles[0].Members[0].Host = "nowhere"
	unknownHost.Clusters[1].Carried.State = stayerState
	unknownHost.Clusters[0].Spec.Name = "elsewhere"
	unknownHostJSON, _ := json.Marshal(unknownHost)
	refused := []struct{ what, content, says string }{
		{"a version it does not know", strings.Replace(string(data), `"clusterflow/v1"`, `"clusterflow/v9"`, 1), `format "clusterflow/v9" is not one this clusterflow reads`},
		{"a file that is not JSON", "clusters: [mover]\n", "not a clusterflow export"},
		{"an unknown host and a spec for another cluster", string(unknownHostJSON), "members stayer-worker-0 are on host nowhere, which this server does not know"},
		{"every problem at once", string(unknownHostJSON), `clusters[0]: cluster mover: its spec is for cluster "elsewhere"`},
	}
	for _, r := range refused {
		bad := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(bad, []byte(r.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := dst.cli("import", "-f", bad); res.Code != 2 || !strings.Contains(res.Stderr, r.says) {
			t.Errorf("import of %s: %s", r.what, res)
		}
	}
	if res := dst.cli("import", "-f", file, "--dry-run"); res.Code != 0 || !strings.Contains(res.Stdout, "Would import cluster mover: 3 members on host-") {
		t.Errorf("import --dry-run: %s", res)
	}
	if res := dst.cli("list", "-o", "json"); res.Code != 0 || strings.TrimSpace(res.Stdout) != "[]" {
		t.Fatalf("something started before the import: %s", res)
	}
	if res := dst.cli("import", "-f", file); res.Code != 0 || !strings.Contains(res.Stdout, "Imported cluster stayer: 2 members on host-1, host-2") {
		t.Fatalf("import: %s", res)
	}
	if res := dst.cli("import", "-f", file); res.Code != 2 || !strings.Contains(res.Stderr, "cluster mover is live on this server") ||
		!strings.Contains(res.Stderr, "cluster stayer is live on this server") {
		t.Errorf("a second import: %s", res)
	}
	if s := dst.status("mover"); s.Phase != workflows.PhaseMaintenance || fmt.Sprint(workerNames(s)) != "[mover-worker-0=ready mover-worker-1=down]" {
		t.Errorf("imported mover: phase %s, %s", s.Phase, workerNames(s))
	}
	if ran := len(readTrace(t, moverTrace)) + len(readTrace(t, stayerTrace)); ran != ranBefore {
		t.Errorf("%d scripts ran during the move", ran-ranBefore)
	}

	// Released, the target replaces the down member at its deadline from the source, and
	// each cluster checks its members against their hosts at once.
	reconciles := func() int {
		n := 0
		for _, e := range dst.history(workflows.ClusterWorkflowID("stayer")) {
			if isReconcileListing(e) {
				n++
			}
		}
		return n
	}
	if n := reconciles(); n != 0 {
		t.Errorf("the imported stayer reconciled %d times in maintenance", n)
	}
	maintenanceOff(dst)
	waitFor(t, "the imported stayer's first reconcile", func() bool { return reconciles() > 0 })
	dst.waitForStatus("mover", "the down member replaced", func(s workflows.ClusterStatus) bool {
		return fmt.Sprint(workerNames(s)) == "[mover-worker-0=ready mover-worker-2=ready<mover-worker-1]" && s.Phase == workflows.PhaseReady
	})
	runs := readTrace(t, moverTrace)
	expectRuns(t, runs, "configure", "", "mover-controller-0", "mover-worker-0", "mover-worker-1", "mover-worker-2")
	expectRuns(t, runs, "teardown", "", "mover-worker-1")
	if c := runsOf(runs, "mover-worker-2", "configure"); len(c) == 1 && c[0].Start < float64(due.UnixNano())/1e9 {
		t.Errorf("replaced before its deadline %s (started at %.3f)", due, c[0].Start)
	}
	stayer := dst.status("stayer")
	if stayer.Phase != workflows.PhaseReady || fmt.Sprint(placements(stayer)) != fmt.Sprint(placements(stayerBefore)) {
		t.Errorf("stayer on the target: %s, placed %v, was %v", stayer.Phase, placements(stayer), placements(stayerBefore))
	}

	// The source closes its workflows as exported, and nothing is torn down.
	if res := src.cli("export", "--retire", "mover", "stayer"); res.Code != 0 || strings.Count(res.Stdout, "is exported") != 2 {
		t.Fatalf("retire: %s", res)
	}
	if res := src.cli("list", "--all"); strings.Count(res.Stdout, "exported") != 2 {
		t.Errorf("the source's clusters after retire:\n%s", res)
	}
	if res := dst.cli("resize", "stayer", "worker=1", "--wait"); res.Code != 0 {
		t.Fatalf("resize on the target: %s", res)
	}
	runs = readTrace(t, stayerTrace)
	expectRuns(t, runs, "configure", "", "stayer-worker-0", "stayer-worker-1")
	expectRuns(t, runs, "teardown", "", "stayer-worker-1")
}

// A host lost during maintenance is held like any health event: its members stay as they
// were, the loss is in their history, and they go down once maintenance ends.
func TestMaintenanceHoldsAHostLossUntilItEnds(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2")
	specPath, _ := writeCluster(t, `
name: hostheld
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}, placement: {maxPerHost: 1}, replaceAfter: 1h}
`)
	if res := f.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	var onH1 string
	deployed := f.status("hostheld")
	for _, m := range deployed.Role("worker").Members {
		if m.Host == "h1" {
			onH1 = m.Name
		}
	}
	maintenanceOn(f.stack, "host move")
	f.killHost("h1")
	f.waitForHosts("h1 lost", func(hs []workflows.HostDocument) bool { return slices.Contains(hostStates(hs), "h1=lost") })
	held := f.waitForStatus("hostheld", "the loss recorded in "+onH1+"'s history", func(s workflows.ClusterStatus) bool {
		h := s.Role("worker").Member(onH1).Health
		return h != nil && len(h.Transitions) > 0 && strings.Contains(h.Transitions[len(h.Transitions)-1].Reason, "not acted on")
	})
	if m := held.Role("worker").Member(onH1); m.State != workflows.MemberReady {
		t.Errorf("%s in maintenance: %s", onH1, m.State)
	}
	maintenanceOff(f.stack)
	f.waitForStatus("hostheld", onH1+" down once maintenance ended", func(s workflows.ClusterStatus) bool {
		return s.Role("worker").Member(onH1).State == workflows.MemberDown
	})
}
