package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// status --member shows one member as the cluster and its host know it: where it lives
// (dir, address), its runs as its host recorded them (event, start, end, exit status, the
// line a failure said), and a failed one's output.
func TestStatusMemberShowsWhereAMemberLivesAndWhatRanThere(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "described"
	failing := n + "-worker-1"
	specPath, _ := writeCluster(t, threeLevelSpec(n, failing))
	if res := cli(t, "deploy", "-f", specPath, "--wait"); res.Code != 1 {
		t.Fatalf("deploy with %s failing: %s", failing, res)
	}
	member := func(name string) starter.MemberView {
		t.Helper()
		res := cli(t, "status", n, "--member", name, "-o", "json")
		var v starter.MemberView
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &v) != nil {
			t.Fatalf("status --member %s -o json: %s", name, res)
		}
		return v
	}
	folder := clusterDir(dataDir, n)
	ok := member(n + "-controller-0")
	if ok.State != workflows.MemberReady || ok.OnHost.Dir != filepath.Join(folder, n+"-controller-0") || ok.OnHost.Address != "127.0.0.1" {
		t.Errorf("the controller: state %s, dir %q, address %q; want ready in %s at 127.0.0.1", ok.State, ok.OnHost.Dir, ok.OnHost.Address, folder)
	}
	if runs := ok.OnHost.Runs; len(runs) != 1 || runs[0].Event != "configure" || runs[0].Outcome != "exited" || runs[0].ExitCode != 0 || runs[0].Duration <= 0 || runs[0].Started.IsZero() {
		t.Errorf("the controller's runs: %+v, want one configure that exited 0", runs)
	}
	failed := member(failing)
	runs := failed.OnHost.Runs
	if failed.State != workflows.MemberConfigError || len(runs) != 1 || runs[0].ExitCode != 3 ||
		runs[0].Failure != "configure exited with status 3: boom: "+failing+" cannot start" {
		t.Errorf("the failed member: state %s, runs %+v; want config_error, one configure that exited 3 saying why", failed.State, runs)
	}
	if !strings.Contains(failed.StderrTail, "cannot start") || !strings.Contains(failed.StdoutTail, "about to fail") {
		t.Errorf("the failed member's output tails are %q and %q", failed.StdoutTail, failed.StderrTail)
	}
	table := cli(t, "status", n, "--member", failing)
	for _, want := range []string{"Member:   " + failing + " (role worker, ordinal 1)", "Dir:      " + filepath.Join(folder, failing), "Address:  127.0.0.1", "configure", "exited 3: configure exited with status 3", "| boom: " + failing + " cannot start"} {
		if !strings.Contains(table.Stdout, want) {
			t.Errorf("status --member %s does not show %q:\n%s", failing, want, table)
		}
	}
	if res := cli(t, "status", n, "--member", n+"-worker-9"); res.Code != 2 || !strings.Contains(res.Stderr, `has no member "`+n+`-worker-9"`) {
		t.Errorf("an unknown member: %s", res)
	}
	mustSucceed(t, "delete", n, "--wait")
}
