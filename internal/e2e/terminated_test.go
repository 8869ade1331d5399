package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

// A cluster whose workflow was terminated (the Web UI has a button for it) is no longer
// managed: status says so, with its last phase, instead of showing that phase as current.
func TestStatusOfATerminatedClusterSaysSo(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "terminated"
	specPath, _ := writeCluster(t, `
name: terminated
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := server.Client.TerminateWorkflow(ctx, workflows.ClusterWorkflowID(n), "", "from the test, as from the Web UI"); err != nil {
		t.Fatal(err)
	}
	res := cli(t, "status", n)
	if res.Code != 0 || !strings.Contains(res.Stdout, "Phase:    terminated (its workflow was terminated (last phase ready), so clusterflow no longer manages it") {
		t.Errorf("status: %s", res)
	}
	var s workflows.ClusterStatus
	res = cli(t, "status", n, "-o", "json")
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil || s.Phase != workflows.PhaseTerminated || len(s.Roles) != 1 || len(s.Roles[0].Members) != 2 {
		t.Errorf("status -o json: %v %s", err, res)
	}
	if res := cli(t, "status", n, "--wait", "--timeout", "30s"); res.Code != 1 || !strings.Contains(res.Stderr, "its workflow was terminated") {
		t.Errorf("status --wait of a terminated cluster should fail at once: %s", res)
	}
	// Changes are refused, saying why.
	if res := cli(t, "resize", n, "only=3"); res.Code != 2 || !strings.Contains(res.Stderr, `cluster "terminated" takes no more changes: its workflow was terminated`) {
		t.Errorf("resize of a terminated cluster: %s", res)
	}
}
