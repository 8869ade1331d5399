package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// Two servers share one host's data folder, as a migration's source and target do, and each
// runs a cluster of the same name. Each cluster has a folder of its own (NAME@HOME) marked
// with its namespace's ID. Reconcile and `hosts --orphans --remove` on one server never touch
// the other's members: not while both run, and not once one server's cluster is an orphan,
// which only that server lists and removes.
func TestServersSharingAHostFolderKeepToTheirOwnClusters(t *testing.T) {
	t.Parallel()
	guard(t)
	shared := filepath.Join(t.TempDir(), "data")
	testenv.StopAllAtEnd(t, shared)
	servers := []*stack{newServerStack(t), newServerStack(t)}
	for _, s := range servers {
		s.start("worker", 1, "Worker starting", "worker", "--data", shared)
	}
	specPath, trace := writeCluster(t, `
name: same
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	homes := make([]string, len(servers))
	for i, s := range servers {
		if res := s.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
			t.Fatalf("deploy on server %d: %s", i, res)
		}
		homes[i] = s.status("same").Home
	}
	if homes[0] == "" || homes[0] == homes[1] {
		t.Fatalf("the clusters' homes: %q; want two", homes)
	}
	folder := func(i int) string { return filepath.Join(shared, "clusters", "same@"+homes[i]) }
	owners := map[string]bool{}
	for i := range servers {
		for _, m := range []string{"same-worker-0", "same-worker-1"} {
			if !exists(filepath.Join(folder(i), m)) {
				t.Errorf("server %d's %s has no sandbox in %s", i, m, folder(i))
			}
		}
		owner, err := os.ReadFile(filepath.Join(folder(i), ".clusterflow", "owner"))
		if err != nil || len(strings.TrimSpace(string(owner))) == 0 {
			t.Errorf("server %d's folder records no owner: %v", i, err)
		}
		owners[string(owner)] = true
	}
	if len(owners) != 2 {
		t.Errorf("both folders record the same owner: %v", owners)
	}
	if configures := len(runsOf(readTrace(t, trace), "", "configure")); configures != 4 {
		t.Errorf("%d configures, want 2 for each server's cluster", configures)
	}
	intact := func(i int, what string) {
		t.Helper()
		for _, m := range []string{"same-worker-0", "same-worker-1"} {
			if !exists(filepath.Join(folder(i), m)) {
				t.Errorf("%s: server %d's %s lost its sandbox", what, i, m)
			}
		}
		if st := servers[i].status("same"); st.Phase != workflows.PhaseReady || st.Role("worker").Ready != 2 {
			t.Errorf("%s: server %d's cluster is %s with %d ready", what, i, st.Phase, st.Role("worker").Ready)
		}
	}

	// While both run: reconcile and orphan removal on server 0.
	if res := servers[0].cli("reconcile", "same"); res.Code != 0 {
		t.Fatalf("reconcile: %s", res)
	}
	if res := servers[0].cli("hosts", "--orphans", "--remove"); res.Code != 0 || !strings.Contains(res.Stdout, "No orphans") {
		t.Errorf("orphans on server 0 while both run: %s", res)
	}
	intact(1, "after server 0's reconcile and orphan removal")
	intact(0, "after its own reconcile")

	// Server 0's cluster becomes an orphan: server 1 does not see it, server 0 removes it.
	c := servers[0].dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.TerminateWorkflow(ctx, workflows.ClusterWorkflowID("same"), "", "terminated from the Web UI, say"); err != nil {
		t.Fatal(err)
	}
	if res := servers[1].cli("hosts", "--orphans", "--remove"); res.Code != 0 || !strings.Contains(res.Stdout, "No orphans") {
		t.Errorf("orphans on server 1 with server 0's cluster orphaned: %s", res)
	}
	if !exists(filepath.Join(folder(0), "same-worker-0")) {
		t.Error("server 1 removed server 0's orphan")
	}
	res := servers[0].cli("hosts", "--orphans", "--remove")
	if res.Code != 0 || !strings.Contains(res.Stdout, "same@"+homes[0]) || strings.Contains(res.Stdout, homes[1]) || !strings.Contains(res.Stdout, "removed") {
		t.Errorf("orphans on server 0: %s; want its own cluster's folder, removed", res)
	}
	if exists(folder(0)) {
		t.Error("server 0's orphan is still there")
	}
	intact(1, "after server 0 removed its orphan")
	if res := servers[1].cli("delete", "same", "--wait"); res.Code != 0 {
		t.Fatalf("delete on server 1: %s", res)
	}
	if exists(folder(1)) {
		t.Error("server 1's folder is left after its delete")
	}
}

// Another namespace cannot take a cluster's folder over by a write of its own: an import of
// the cluster's export without its folder key (a namespace writer who knows the cluster's
// home, say) is refused by the host, which keeps the folder its owner's, members and all.
// The owner's import with the key is the export/import hand-off, which the move from dev to
// PostgreSQL drives (TestExportAndImportMoveLiveClustersFromDevToPostgres).
func TestAnotherNamespaceCannotTakeAClustersFolderOver(t *testing.T) {
	t.Parallel()
	guard(t)
	shared := filepath.Join(t.TempDir(), "data")
	testenv.StopAllAtEnd(t, shared)
	owner, other := newServerStack(t), newServerStack(t)
	for _, s := range []*stack{owner, other} {
		s.start("worker", 1, "Worker starting", "worker", "--data", shared)
	}
	specPath, _ := writeCluster(t, `
name: victim
roles:
  - {name: worker, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	if res := owner.cli("deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	home := owner.status("victim").Home
	folder := filepath.Join(shared, "clusters", "victim@"+home)
	ownerID, err := os.ReadFile(filepath.Join(folder, ".clusterflow", "owner"))
	if err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "victim.json")
	if res := owner.cli("export", "victim", "-o", exported); res.Code != 0 {
		t.Fatalf("export: %s", res)
	}
	data, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	stripped := regexp.MustCompile(`"folderKey":\s*"[^"]*",?`).ReplaceAll(data, nil)
	if bytes.Equal(stripped, data) {
		t.Fatalf("the export carries no folder key:\n%.2000s", data)
	}
	if err := os.WriteFile(exported, stripped, 0o600); err != nil {
		t.Fatal(err)
	}
	maintenanceOn(other, "taking a folder that is not ours")
	if res := other.cli("import", "-f", exported); res.Code != 0 {
		t.Fatalf("import: %s", res)
	}
	if res := other.cli("maintenance", "off"); res.Code != 0 {
		t.Fatalf("maintenance off: %s", res)
	}
	res := other.cli("resize", "victim", "worker=3", "--wait")
	if res.Code == 0 || !strings.Contains(res.Stdout+res.Stderr, "belongs to another server or namespace") {
		t.Errorf("the other namespace's resize of the folder it does not own: %s; want it refused, naming the owner", res)
	}
	if now, _ := os.ReadFile(filepath.Join(folder, ".clusterflow", "owner")); !bytes.Equal(now, ownerID) {
		t.Errorf("the folder's owner is now %q, was %q", now, ownerID)
	}
	for _, m := range []string{"victim-worker-0", "victim-worker-1"} {
		if !exists(filepath.Join(folder, m)) {
			t.Errorf("%s lost its sandbox", m)
		}
	}
	if exists(filepath.Join(folder, "victim-worker-2")) {
		t.Error("the other namespace made a member in the folder")
	}
	// Nor does its delete remove anything of it.
	other.cli("delete", "victim", "--wait")
	for _, m := range []string{"victim-worker-0", "victim-worker-1"} {
		if !exists(filepath.Join(folder, m)) {
			t.Errorf("the other namespace's delete removed %s", m)
		}
	}
	if st := owner.status("victim"); st.Phase != workflows.PhaseReady || st.Role("worker").Ready != 2 {
		t.Errorf("the owner's cluster is %s with %d ready", st.Phase, st.Role("worker").Ready)
	}
	if res := owner.cli("delete", "victim", "--wait"); res.Code != 0 {
		t.Errorf("the owner's delete: %s", res)
	}
}
