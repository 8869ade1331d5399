package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// serviceScript is a startscript whose configure starts a long-running service, as a real
// app's does, and whose check tests that the service answers. It traces each run but its
// checks (as traceScript does), which would flood the trace. A member's check hangs while
// the file check.hang is in its folder, recording its PID in check.pid; while check.flap is
// there, it fails twice and passes twice in turn; a configure with READY_AFTER makes its service
// answer only that many seconds after it starts, or never with "never".
const serviceScript = `#!/bin/sh
now() { date +%s.%N; }
event=$CLUSTERFLOW_EVENT
if [ "$event" = check ]; then
  if [ -e check.hang ]; then echo $$ > check.pid; exec sleep 3600; fi
  if [ -e check.flap ]; then
    n=$(( $(cat flap.count 2>/dev/null || echo 0) + 1 )); echo $n > flap.count
    [ $((n % 4)) -ge 2 ] || { echo "flapped down" >&2; exit 1; }
  fi
  [ -e service.ready ] || { echo "service not answering yet" >&2; exit 1; }
  pid=$(cat service.pid 2>/dev/null) || { echo "no service" >&2; exit 1; }
  kill -0 "$pid" 2>/dev/null || { echo "service $pid is not running" >&2; exit 1; }
  exit 0
fi
echo "start $(now) $CLUSTERFLOW_MEMBER $event $*" >> "$TRACE"
case "$event" in
configure)
  delay=${READY_AFTER:-0}
  setsid sh -c 'echo $$ > service.pid; if [ "$1" != never ]; then sleep "$1"; : > service.ready; fi; exec sleep 3600' sh "$delay" </dev/null >/dev/null 2>&1 &
  ;;
teardown)
  pid=$(cat service.pid 2>/dev/null) && kill "$pid" 2>/dev/null
  ;;
esac
echo "end $(now) $CLUSTERFLOW_MEMBER $event ok" >> "$TRACE"
`

// writeServiceCluster writes a spec and serviceScript as service.sh beside it.
func writeServiceCluster(t *testing.T, spec string) (specPath, tracePath string) {
	t.Helper()
	specPath, tracePath = writeCluster(t, spec)
	if err := os.WriteFile(filepath.Join(filepath.Dir(specPath), "service.sh"), []byte(serviceScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return specPath, tracePath
}

// memberFile is a file in a member's folder.
func memberFile(cluster, member, name string) string {
	return filepath.Join(clusterDir(dataDir, cluster), member, name)
}

// readPID reads a PID a script wrote into its member's folder.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "a PID in "+path, func() bool {
		data, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 1
	})
	return pid
}

func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

// Nobody signals anything: the members' own checks find a killed service and a hanging
// check, the state machine takes both members down and replaces them after replaceAfter,
// and the survivors are told once; a check that flaps leaves its member flapping, never
// replaced.
func TestMembersCheckThemselvesAndADeadServiceIsReplaced(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "probed"
	specPath, trace := writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - name: svc
    members: 3
    startscript: service.sh
    env: {TRACE: TRACE_FILE}
    events: [configure, addnodes, delnodes, teardown, check]
    probe: {every: 1s, timeout: 1s, failures: 2}
    replaceAfter: 5s
    maxUnavailable: "2"
  - {name: flappy, members: 1, startscript: service.sh, env: {TRACE: TRACE_FILE}, events: [configure, addnodes, delnodes, teardown, check], probe: {every: 1s, failures: 2}, flapLimit: 1, replaceAfter: 10m}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	member := func(i int) string { return fmt.Sprintf("%s-svc-%d", n, i) }
	flappy := n + "-flappy-0"

	// One member's service is killed from outside, another's check hangs, a third's flaps.
	service := readPID(t, memberFile(n, member(1), "service.pid"))
	killed := time.Now()
	if err := syscall.Kill(service, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for file, m := range map[string]string{"check.hang": member(2), "check.flap": flappy} {
		if err := os.WriteFile(memberFile(n, m, file), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hung := readPID(t, memberFile(n, member(2), "check.pid"))

	// Each goes down by its own check, with what the check said.
	downs := map[string]*workflows.MemberStatus{}
	var downAt time.Duration
	waitFor(t, "the killed and the hung member down by their checks", func() bool {
		s := statusJSON(t, n)
		for _, i := range []int{1, 2} {
			m := s.Role("svc").Member(member(i))
			if _, seen := downs[m.Name]; !seen && m.State == workflows.MemberDown {
				downs[m.Name] = m
				if i == 1 {
					downAt = time.Since(killed)
				}
			}
		}
		return len(downs) == 2
	})
	t.Logf("the killed service's member was down %s after the kill (every 1s × failures 2)", downAt.Round(100*time.Millisecond))
	for name, want := range map[string]string{member(1): "exited with status 1", member(2): "timed out after 1s"} {
		m := downs[name]
		tr := m.Health.Transitions
		c := m.Health.LastCheck
		if len(tr) == 0 || tr[len(tr)-1].Source != workflows.ProbeSource || c == nil || c.Passed || c.InARow != 2 || c.Result != want {
			t.Errorf("%s went down by %+v, its last check %+v; want its probe's, %q, 2 in a row", name, tr, c, want)
		}
	}
	if c := downs[member(1)].Health.LastCheck; c != nil && !strings.Contains(c.Output, "is not running") {
		t.Errorf("the killed service's check output %q does not say why it failed", c.Output)
	}
	waitFor(t, "the hung check killed at its timeout", func() bool { return !processAlive(hung) })
	if table := cli(t, "status", n); !strings.Contains(table.Stdout, "check failed 2 times in a row") || !strings.Contains(table.Stdout, "last check reported") || !strings.Contains(table.Stdout, "exited with status 1, 2 in a row: service") {
		t.Errorf("status does not show why the members went down, and their last checks:\n%s", table.Stdout)
	}
	// The Web UI's current details name the members failing their checks, while they are down.
	// (Read before the status: a member still down then was down when they were read.)
	details := currentDetailsOf(t, server.Client, workflows.ClusterWorkflowID(n))
	if s := statusJSON(t, n); s.Role("svc").Member(member(2)).State != workflows.MemberDown {
		t.Logf("%s was replaced before its current details were read", member(2))
	} else if !strings.Contains(details, "failing their checks: ") || !strings.Contains(details, member(2)+" (timed out after 1s, 2 in a row)") {
		t.Errorf("the current details do not name the member failing its check while it is down: %q", details)
	}

	// Both are replaced after replaceAfter; the flapping one stays.
	var s workflows.ClusterStatus
	waitFor(t, "the two down members replaced", func() bool {
		s = statusJSON(t, n)
		return slices.Equal(memberStates(s, "svc"), []string{member(0) + "=ready", member(3) + "=ready", member(4) + "=ready"})
	})
	t.Logf("the killed service's member was replaced by a ready member %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	waitFor(t, "the flapping member flapping", func() bool {
		s = statusJSON(t, n)
		return s.Role("flappy").Member(flappy).State == workflows.MemberFlapping
	})
	if m := s.Role("flappy").Member(flappy); !strings.Contains(m.Detail, "flapping") || m.Health.Transitions[len(m.Health.Transitions)-1].Source != workflows.ProbeSource {
		t.Errorf("the flapping member: %s (%s), %+v", m.State, m.Detail, m.Health)
	}
	// The survivor is told of each replacement once: the two may come together or apart.
	// (The flapping member is told of what it missed once it is steady again.)
	told := func(event string) []string {
		var nodes []string
		for _, r := range runsOf(readTrace(t, trace), member(0), event) {
			_, list, _ := strings.Cut(r.Args, "--nodes ")
			nodes = append(nodes, strings.Split(list, ",")...)
		}
		slices.Sort(nodes)
		return nodes
	}
	for event, want := range map[string][]string{"addnodes": {member(3), member(4)}, "delnodes": {member(1), member(2)}} {
		waitFor(t, member(0)+" told by "+event+" of "+strings.Join(want, " and "), func() bool { return len(told(event)) >= len(want) })
		if got := told(event); !slices.Equal(got, want) {
			t.Errorf("%s was told by %s of %v, want each of %v once", member(0), event, got, want)
		}
	}
	mustSucceed(t, "delete", n, "--wait")
}

// A ready-after probe holds a configure until its service answers, and fails one whose
// service never does, within readyTimeout.
func TestAReadyAfterProbeWaitsForTheServiceToAnswer(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "readyafter"
	specPath, trace := writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: slow, members: 1, startscript: service.sh, env: {TRACE: TRACE_FILE, READY_AFTER: "2"}, events: [configure, teardown, check], probe: {every: 1s, readyAfter: true, readyTimeout: 30s}}
  - {name: dead, members: 1, startscript: service.sh, env: {TRACE: TRACE_FILE, READY_AFTER: never}, events: [configure, teardown, check], probe: {every: 1s, readyAfter: true, readyTimeout: 3s}}
`, n))
	res := cli(t, "deploy", "-f", specPath, "--wait")
	if res.Code == 0 {
		t.Fatalf("deploy succeeded with a member whose service never answers: %s", res)
	}
	s := statusJSON(t, n)
	if m := s.Role("slow").Member(n + "-slow-0"); m.State != workflows.MemberReady {
		t.Errorf("the slow member is %s (%s), want ready once its service answered", m.State, m.Detail)
	}
	if m := s.Role("dead").Member(n + "-dead-0"); m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, "its check did not pass within readyTimeout 3s") || !strings.Contains(m.Detail, "service not answering yet") {
		t.Errorf("the dead member is %s (%s), want config_error naming its check", m.State, m.Detail)
	}
	// The slow member's configure script ended at once, its service answered two seconds
	// later, and only then was the member ready.
	if got := runsOf(readTrace(t, trace), n+"-slow-0", "configure"); len(got) != 1 {
		t.Errorf("the slow member's configure ran %d times", len(got))
	}
	answered, err := os.Stat(memberFile(n, n+"-slow-0", "service.ready"))
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Role("slow").Member(n + "-slow-0"); m.Since.Before(answered.ModTime()) {
		t.Errorf("the slow member was ready at %s, before its service answered at %s", m.Since, answered.ModTime())
	}
	mustSucceed(t, "delete", n, "--wait")
}

// A member taken down by an operator (a false alarm) while its own check keeps passing goes
// up again after probe.successes passing checks, as a member down by its check does: it
// is not replaced. Its host reports only changes of its check's result, so the cluster
// has it count them afresh.
func TestAMemberDownByAnOperatorComesUpByItsPassingChecks(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "falsealarm"
	specPath, _ := writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: db, members: 2, startscript: service.sh, env: {TRACE: TRACE_FILE}, events: [configure, teardown, check], probe: {every: 1s, successes: 3}, replaceAfter: 10m}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	member := n + "-db-0"
	signaled := time.Now()
	mustSucceed(t, "signal", n, member, "down", "--reason", "a false alarm")
	var m *workflows.MemberStatus
	waitFor(t, member+" down by the operator, then up by its checks", func() bool {
		s := statusJSON(t, n)
		m = s.Role("db").Member(member)
		tr := m.Health.Transitions
		return m.State == workflows.MemberReady && len(tr) >= 2 && tr[len(tr)-2].To == workflows.MemberDown && tr[len(tr)-1].Source == workflows.ProbeSource
	})
	tr := m.Health.Transitions
	down, up := tr[len(tr)-2], tr[len(tr)-1]
	if down.Reason != "a false alarm" || up.From != workflows.MemberDown || m.Health.LastCheck == nil || !m.Health.LastCheck.Passed || m.Health.LastCheck.InARow != 3 {
		t.Errorf("%s went down by %+v and up by %+v, its last check %+v; want up by 3 passing checks in a row", member, down, up, m.Health.LastCheck)
	}
	if took := up.At.Sub(down.At); took < 2*time.Second {
		t.Errorf("%s came up %s after it went down: before 3 checks a second apart could pass", member, took)
	}
	t.Logf("%s was up again %s after the operator took it down", member, time.Since(signaled).Round(100*time.Millisecond))
	if got := memberStates(statusJSON(t, n), "db"); !slices.Equal(got, []string{n + "-db-0=ready", n + "-db-1=ready"}) {
		t.Errorf("members %v; want the same two, ready, none replaced", got)
	}
	mustSucceed(t, "delete", n, "--wait")
}

// historyOf counts, by type, the events of each run of the workflows whose IDs start with
// prefix (a cluster and its role children), keyed by "WORKFLOW-ID RUN-ID".
func historyOf(t *testing.T, prefix string) map[string]map[enums.EventType]int {
	t.Helper()
	c, err := testenv.Dial(server.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs := map[string]map[enums.EventType]int{}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", PageSize: 1000, NextPageToken: token, Query: fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Executions {
			byType := map[enums.EventType]int{}
			it := c.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				byType[ev.EventType]++
			}
			runs[e.Execution.WorkflowId+" "+e.Execution.RunId] = byType
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return runs
		}
	}
}

// A thousand members checked every second for a minute add nothing to any history but the
// transitions their checks cause: three members made to fail go down by one update each,
// and nothing else is written, in the cluster's history or its role children's. It runs
// alone (no t.Parallel): a thousand checks a second take the machine.
func TestAThousandProbedMembersAddOnlyTheirTransitionsToHistory(t *testing.T) {
	guard(t)
	n := "probedthousand"
	dir := t.TempDir()
	script := filepath.Join(dir, "check.sh")
	// A check notes that it ran (a byte each), and fails where the member's folder has "sick".
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$CLUSTERFLOW_EVENT\" = check ] || exit 0\nprintf x >> checks\n[ ! -e sick ] || { echo sick >&2; exit 1; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The reconcile is set far off, so that the minute holds nothing but probes.
	spec := filepath.Join(dir, "probed.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`
name: %s
reconcileEvery: 1h
roles:
  - {name: svc, members: 1000, maxInFlight: 500, startscript: %s, events: [configure, check], probe: {every: 1s, failures: 2}, replaceAfter: 1h, maxUnavailable: "10"}
`, n, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if deploy := runFor(t, 150*time.Second, "deploy", "-f", spec, "--wait", "--timeout", "140s"); deploy.Code != 0 {
		t.Fatalf("deploy: %s", deploy)
	}
	defer func() {
		deleting := time.Now()
		if del := runFor(t, 150*time.Second, "delete", n, "--wait", "--timeout", "140s"); del.Code != 0 {
			t.Errorf("delete: %s", del)
		}
		t.Logf("deleted in %s", time.Since(deleting))
	}()
	member := func(i int) string { return fmt.Sprintf("%s-svc-%d", n, i) }
	t.Logf("deployed in %s", time.Since(started))
	before := historyOf(t, workflows.ClusterWorkflowID(n))

	sick := []string{member(7), member(500), member(999)}
	for _, m := range sick {
		if err := os.WriteFile(memberFile(n, m, "sick"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	probing := time.Now()
	waitFor(t, "the three sick members down", func() bool {
		s := statusJSON(t, n)
		return slices.IndexFunc(sick, func(m string) bool { return s.Role("svc").Member(m).State != workflows.MemberDown }) < 0
	})
	t.Logf("sick members down after %s", time.Since(probing))
	time.Sleep(time.Minute - time.Since(probing)) // the minute of probing the test is about

	// Every member was checked, again and again.
	var unchecked []string
	least := int64(-1)
	for i := range 1000 {
		info, err := os.Stat(memberFile(n, member(i), "checks"))
		if err != nil || info.Size() < 2 {
			unchecked = append(unchecked, member(i))
		} else if least < 0 || info.Size() < least {
			least = info.Size()
		}
	}
	if len(unchecked) > 0 {
		t.Errorf("%d members were checked less than twice in the minute, e.g. %v", len(unchecked), unchecked[:min(5, len(unchecked))])
	}
	t.Logf("every member checked was checked at least %d times in the minute", least)
	after := historyOf(t, workflows.ClusterWorkflowID(n))
	if len(after) != len(before) {
		t.Errorf("%d workflow runs before the minute, %d after: the probes started or ended runs", len(before), len(after))
	}
	for run, was := range before {
		now := after[run]
		if strings.HasPrefix(run, workflows.ClusterWorkflowID(n)+" ") {
			// The cluster: one accepted and completed update per transition, and the
			// workflow tasks and the health timers they take.
			added := map[enums.EventType]int{}
			total := 0
			for typ, count := range now {
				if d := count - was[typ]; d != 0 {
					added[typ], total = d, total+d
				}
			}
			if added[enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED] != len(sick) || added[enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED] != len(sick) {
				t.Errorf("the cluster took %d updates (%d completed) in the minute, want one per transition: %d", added[enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED], added[enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED], len(sick))
			}
			for _, typ := range []enums.EventType{enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED} {
				if added[typ] != 0 {
					t.Errorf("the cluster's history added %d %s in the minute", added[typ], typ)
				}
			}
			// Each transition: an update accepted and completed, a workflow task (three
			// events) and a health timer restarted (two).
			if total > len(sick)*7 {
				t.Errorf("the cluster's history added %d events for %d transitions: %v", total, len(sick), added)
			}
			t.Logf("the cluster's history added %d events in a minute of 1,000 members probed every second, for %d transitions: %v", total, len(sick), added)
			continue
		}
		for typ, count := range now {
			if count != was[typ] {
				t.Errorf("role child %s added %d %s events in the minute", run, count-was[typ], typ)
			}
		}
	}
}
