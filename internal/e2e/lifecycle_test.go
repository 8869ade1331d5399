package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/workflows"
)

// TestDeleteTearsDownEveryMemberWhoseConfigureRan deletes clusters whose members are in
// each state a delete can find them in, and checks that exactly the members whose
// configure ran get --teardown: ready, down, configure failed, a notification failed
// (config_error after addnodes, which a delete used to leave running) and configuring
// (cancelled mid-configure); not a member still pending.
func TestDeleteTearsDownEveryMemberWhoseConfigureRan(t *testing.T) {
	t.Parallel()
	guard(t)
	t.Run("a survivor whose addnodes failed", func(t *testing.T) {
		t.Parallel()
		n := "tornaddnodes"
		specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_EVENT: addnodes, FAIL_MEMBER: %[1]s-worker-0}}
`, n))
		mustSucceed(t, "deploy", "-f", specPath, "--wait")
		if res := cli(t, "resize", n, "worker=2", "--wait", "--timeout", "60s"); res.Code == 0 {
			t.Fatalf("a resize whose addnodes fails should fail: %s", res)
		}
		s := statusJSON(t, n)
		if got := memberStates(s, "worker"); s.Phase != workflows.PhaseFailed || !slices.Equal(got, []string{n + "-worker-0=config_error", n + "-worker-1=ready"}) {
			t.Fatalf("after the failed addnodes: phase %s, workers %v", s.Phase, got)
		}
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		expectRuns(t, readTrace(t, trace), "teardown", "--teardown", n+"-worker-0", n+"-worker-1")
	})
	t.Run("ready down and configure failed", func(t *testing.T) {
		t.Parallel()
		n := "tornfailed"
		specPath, trace := writeCluster(t, fmt.Sprintf(`
name: %[1]s
roles:
  - {name: controller, cardinality: "1", startscript: trace.sh, env: {TRACE: TRACE_FILE}}
  - {name: worker, members: 2, maxInFlight: 1, dependsOn: [controller], startscript: trace.sh, env: {TRACE: TRACE_FILE, FAIL_MEMBER: %[1]s-worker-1}}
`, n))
		if res := cli(t, "deploy", "-f", specPath, "--wait", "--timeout", "60s"); res.Code != 1 {
			t.Fatalf("the deploy should fail: %s", res)
		}
		mustSucceed(t, "signal", n, n+"-controller-0", "down", "--reason", "test")
		waitFor(t, "the controller to be down", func() bool {
			return slices.Equal(memberStates(statusJSON(t, n), "controller"), []string{n + "-controller-0=down"})
		})
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		expectRuns(t, readTrace(t, trace), "teardown", "--teardown", n+"-controller-0", n+"-worker-0", n+"-worker-1")
	})
	t.Run("configuring and pending", func(t *testing.T) {
		t.Parallel()
		n := "tornmidway"
		specPath, trace := writeCluster(t, resizableSpec(n))
		holdOn(t, trace+".hold-controller")
		mustSucceed(t, "deploy", "-f", specPath)
		waitFor(t, "the controller's configure to start", func() bool { return len(runsOf(readTrace(t, trace), n+"-controller-0", "configure")) == 1 })
		mustSucceed(t, "delete", n, "--wait", "--timeout", "60s")
		runs := readTrace(t, trace)
		expectRuns(t, runs, "teardown", "--teardown", n+"-controller-0")
		if configured := runsOf(runs, n+"-worker-", ""); len(configured) != 0 {
			t.Errorf("pending workers ran scripts: %+v", configured)
		}
	})
}

// TestNamesAreNeverReusedAndSurvivorsHearOfTheSuccessorFirst shrinks a role and grows it
// again (the new member takes the next ordinal, not a removed one: apps like etcd remember
// members by name), then replaces a member: its survivors run addnodes of the successor
// before delnodes of the member it replaces, after that member's teardown.
func TestNamesAreNeverReusedAndSurvivorsHearOfTheSuccessorFirst(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "noreuse"
	specPath, trace := writeCluster(t, healthSpec(n, "1s"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "resize", n, "worker=4", "--wait")
	mustSucceed(t, "resize", n, "worker=2", "--wait")
	mustSucceed(t, "resize", n, "worker=3", "--wait")
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-1=ready", n+"-worker-4=ready")

	if res := cli(t, "signal", n, n+"-worker-1", "down", "--reason", "test"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	waitForWorkers(t, n, n+"-worker-0=ready", n+"-worker-4=ready", n+"-worker-5=ready<"+n+"-worker-1")
	runs := readTrace(t, trace)
	teardown := runsOf(runs, n+"-worker-1", "teardown")
	if len(teardown) != 1 {
		t.Fatalf("the replaced member's teardowns: %+v", teardown)
	}
	var told []string
	for _, r := range runs {
		if r.Event == "addnodes" && strings.HasSuffix(r.Args, "--nodes "+n+"-worker-5") ||
			r.Event == "delnodes" && strings.HasSuffix(r.Args, "--nodes "+n+"-worker-1") {
			told = append(told, r.Member+" "+r.Event)
		}
	}
	want := []string{n + "-controller-0 addnodes", n + "-worker-0 addnodes", n + "-worker-4 addnodes", n + "-controller-0 delnodes", n + "-worker-0 delnodes", n + "-worker-4 delnodes"}
	slices.Sort(want)
	if !slices.Equal(slices.Sorted(slices.Values(told)), want) {
		t.Fatalf("survivors were told %v, want %v", told, want)
	}
	for _, add := range runsOf(runs, "", "addnodes") {
		if !strings.HasSuffix(add.Args, n+"-worker-5") {
			continue
		}
		if add.Start < teardown[0].End {
			t.Errorf("%s heard of the successor before its predecessor's teardown ended", add.Member)
		}
		for _, del := range runsOf(runs, "", "delnodes") {
			if strings.HasSuffix(del.Args, n+"-worker-1") && del.Start < add.End {
				t.Errorf("delnodes of the replaced member on %s started before addnodes of its successor on %s ended", del.Member, add.Member)
			}
		}
	}
	mustSucceed(t, "delete", n, "--wait")
}
