package e2e

import (
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/workflows"
)

// A failed configure in one batch of a wide role stops the other batches, through the real
// CLI and real scripts: the members already running finish, the rest never start and say
// why, and status names the failure with its output. 600 workers run as 3 batches, 2
// members at a time each; every configure waits on a hold file, so when worker-1 fails the
// only other members started are those running beside it.
func TestAFailureStopsEveryBatchOfAWideRole(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, trace := writeCluster(t, `
name: failwide
roles:
  - {name: worker, members: 600, maxInFlight: 6, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: failwide-worker-1, HOLD: TRACE_FILE.hold}}
`)
	hold := trace + ".hold"
	holdOn(t, hold)
	mustSucceed(t, "deploy", "-f", specPath)
	waitFor(t, "the cluster to learn of worker-1's failure while its batch still runs", func() bool {
		s := statusJSON(t, "failwide")
		m := s.Member("failwide-worker-1")
		return m != nil && m.State == workflows.MemberConfigError
	})
	release(t, hold)
	var status workflows.ClusterStatus
	waitFor(t, "the deploy to fail", func() bool {
		status = statusJSON(t, "failwide")
		return status.Phase == workflows.PhaseFailed
	})

	started := runsOf(readTrace(t, trace), "failwide-worker-", "configure")
	// 6 ran at once; a batch the halt reached late may have started a few more.
	if len(started) > 100 {
		t.Errorf("%d of 600 configures started after worker-1 failed with 6 at a time", len(started))
	}
	ready, notStarted := 0, 0
	for _, m := range status.Role("worker").Members {
		switch {
		case m.State == workflows.MemberReady:
			ready++
		case m.State == workflows.MemberPending && strings.HasPrefix(m.Detail, "not started: failwide-worker-1 failed"):
			notStarted++
		}
	}
	if ready != len(started)-1 || notStarted != 600-len(started) {
		t.Errorf("%d ready and %d pending saying why, after %d started; want every started one but worker-1 ready, and every other one pending, naming worker-1",
			ready, notStarted, len(started))
	}
	res := cli(t, "status", "failwide")
	if !strings.Contains(res.Stdout, "failwide-worker-1") || !strings.Contains(res.Stdout, "boom: failwide-worker-1 cannot start") {
		t.Errorf("status should name the failure with its output:\n%s", res.Stdout)
	}
	mustSucceed(t, "delete", "failwide", "--wait")
}
