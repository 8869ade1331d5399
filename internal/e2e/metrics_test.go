package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
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

// A real Prometheus (Debian's) scrapes the suite's worker, with the shipped alert rules
// loaded, while a cluster is deployed, resized, loses a member to its own check and has
// it replaced, and is deleted. What Prometheus reads matches `status`: the members by role
// and state, the cluster's phase; the counts of operations, scripts, health transitions
// and replacements are those the scenario made, each once. The rules evaluate cleanly, and
// every expression of the shipped dashboard is valid PromQL over metrics the worker serves.
func TestPrometheusReadsWhatStatusSays(t *testing.T) {
	t.Parallel()
	guard(t)
	rules, dashboard := repoFile(t, "deploy/prometheus/clusterflow-alerts.yml"), repoFile(t, "deploy/grafana/clusterflow.json")
	if out, err := exec.Command("promtool", "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s (Debian's prometheus package; .ci/deps installs it): %v\n%s", rules, err, out)
	}
	prom := startPrometheus(t, rules)

	n := "metered"
	specPath, _ := writeServiceCluster(t, fmt.Sprintf(`
name: %s
roles:
  - name: svc
    members: 3
    startscript: service.sh
    env: {TRACE: TRACE_FILE}
    events: [configure, addnodes, delnodes, teardown, check]
    probe: {every: 1s, timeout: 1s, failures: 2}
    replaceAfter: 2s
  - {name: front, members: 1, startscript: service.sh, env: {TRACE: TRACE_FILE}, events: [configure, teardown]}
`, n))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	mustSucceed(t, "resize", n, "svc=4", "--wait")
	member := func(i int) string { return fmt.Sprintf("%s-svc-%d", n, i) }
	if err := syscall.Kill(readPID(t, memberFile(n, member(1), "service.pid")), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var s workflows.ClusterStatus
	waitFor(t, "the member whose service died replaced by its check", func() bool {
		s = statusJSON(t, n)
		return s.Phase == workflows.PhaseReady && slices.Equal(memberStates(s, "svc"),
			[]string{member(0) + "=ready", member(2) + "=ready", member(3) + "=ready", member(4) + "=ready"})
	})

	// The members by role and state, and the phase, as status counts them.
	want := map[string]float64{"phase " + string(s.Phase): 1}
	for _, r := range s.Roles {
		for state, count := range r.States {
			want[r.Name+" "+string(state)] = float64(count)
		}
		want[r.Name+" desired"] = float64(r.Desired)
	}
	read := func() map[string]float64 {
		got := map[string]float64{}
		for _, v := range prom.query(t, fmt.Sprintf(`clusterflow_members{cluster=%q}`, n)) {
			got[v.Metric["role"]+" "+v.Metric["state"]] = v.Value
		}
		for _, v := range prom.query(t, fmt.Sprintf(`clusterflow_role_desired_members{cluster=%q}`, n)) {
			got[v.Metric["role"]+" desired"] = v.Value
		}
		for _, v := range prom.query(t, fmt.Sprintf(`clusterflow_cluster_phase{cluster=%q}`, n)) {
			got["phase "+v.Metric["phase"]] = v.Value
		}
		return got
	}
	var got map[string]float64
	waitFor(t, "Prometheus to read the members and phase status shows", func() bool { got = read(); return maps.Equal(got, want) })

	// What happened, each counted once: a deploy of 4 members, a resize by one, the replaced
	// member's check taking it down, its replacement after replaceAfter, the teardown.
	counted := map[string]float64{
		`sum(clusterflow_operation_seconds_count{cluster="%s",kind="deploy",result="ok"})`:                                           1,
		`sum(clusterflow_script_seconds_count{cluster="%s",role="svc",event="configure",result="ok"})`:                               5,
		`sum(clusterflow_script_seconds_count{cluster="%s",role="front",event="configure",result="ok"})`:                             1,
		`sum(clusterflow_script_seconds_count{cluster="%s",role="svc",event="teardown",result="ok"})`:                                1,
		`sum(clusterflow_member_transitions_total{cluster="%s",from="ready",to="down",reporter="probe"})`:                            1,
		`sum(clusterflow_member_transitions_total{cluster="%s",from="down",to="replacing",event="timeout"})`:                         1,
		`sum(clusterflow_member_replacements_total{cluster="%s",role="svc",event="timeout"})`:                                        1,
		`sum(clusterflow_operation_seconds_count{cluster="%s",kind="update",result="ok"}) >= bool 2`:                                 1,
		`sum(clusterflow_operation_seconds_count{cluster="%s",result!~"ok|superseded"}) or vector(0)`:                                0,
		`sum(clusterflow_script_seconds_count{cluster="%s",result!="ok"}) or vector(0)`:                                              0,
		`histogram_quantile(0.5, sum by (le) (clusterflow_script_seconds_bucket{cluster="%s"})) < bool 60`:                           1,
		`sum(clusterflow_script_seconds_count{cluster="%s"}) == bool sum(clusterflow_script_seconds_bucket{cluster="%s",le="+Inf"})`: 1,
	}
	scalar := func(expr string) float64 {
		q := strings.ReplaceAll(expr, "%s", n)
		v := prom.query(t, q)
		if len(v) != 1 {
			return -1
		}
		return v[0].Value
	}
	waitFor(t, "Prometheus to read what the scenario did", func() bool {
		for expr, want := range counted {
			if scalar(expr) != want {
				return false
			}
		}
		return true
	})
	for expr, want := range counted {
		if got := scalar(expr); got != want {
			t.Errorf("%s = %v, want %v", strings.ReplaceAll(expr, "%s", n), got, want)
		}
	}

	// The shipped rules load and evaluate without error.
	shipped, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	alerts := strings.Count(string(shipped), "- alert: ")
	waitFor(t, fmt.Sprintf("the %d shipped alert rules evaluated", alerts), func() bool { return prom.rulesEvaluated(t) == alerts })

	// Every metric the rules and the dashboard name is one the worker serves, and every
	// dashboard expression is valid PromQL.
	page := httpGet(t, metricsURL)
	for _, file := range []string{rules, dashboard} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(string(data), -1)))) {
			if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(page) {
				t.Errorf("%s names %s, which the worker does not serve", filepath.Base(file), name)
			}
		}
	}
	for _, expr := range dashboardExprs(t, dashboard) {
		expr = strings.NewReplacer("$cluster", n, "$__rate_interval", "1m").Replace(expr)
		prom.query(t, expr) // fails the test on an invalid expression
	}

	// A deleted cluster's delete is counted, and it leaves the state.
	mustSucceed(t, "delete", n, "--wait")
	waitFor(t, "the delete counted and the cluster gone from the state", func() bool {
		return scalar(`sum(clusterflow_operation_seconds_count{cluster="%s",kind="delete",result="ok"})`) == 1 &&
			len(prom.query(t, fmt.Sprintf(`clusterflow_members{cluster=%q}`, n))) == 0
	})
}

// metricName finds the names of metrics in rules and dashboards.
var metricName = regexp.MustCompile(`\b(clusterflow|temporal)_[a-z_]+[a-z]\b`)

// repoFile is the absolute path of a file of the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// dashboardExprs lists the PromQL of every panel of a Grafana dashboard.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("%s has %d expressions", path, len(exprs))
	}
	return exprs
}

// A worker that takes over a cluster replays its history before it goes on: what the
// history holds was counted by the worker that made it, and the new one counts only what
// happens after. Here a worker of the test's own deploys a cluster and is killed; the next
// resizes it, and its metrics count the resize alone. Its agent, a host's own, says what
// it runs: the new member's configure while it runs, and the members it checks.
func TestAWorkerThatReplaysACountsNothingAgain(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	queue := "replayed-" + strconv.Itoa(os.Getpid())
	startWorker := func(n int) (*testenv.Process, string) {
		address := freeAddress(t)
		w, err := testenv.Start(dir, dir, fmt.Sprintf("worker-%d", n), cliEnv, "worker", "--data", data, "--task-queue", queue, "--metrics-address", address)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		if err := w.WaitFor("Worker starting", time.Minute); err != nil {
			t.Fatal(err)
		}
		return w, "http://" + address + "/metrics"
	}
	n := "replayed"
	specPath, _ := writeCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: worker, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE, HOLD: %s}, events: [configure, teardown, check], probe: {every: 1s}}
`, n, filepath.Join(dir, "hold")))
	first, firstMetrics := startWorker(1)
	mustSucceed(t, "deploy", "-f", specPath, "--task-queue", queue, "--wait")
	count := func(page, name string, labels ...string) float64 {
		total := 0.0
		for _, line := range strings.Split(page, "\n") {
			rest, ok := strings.CutPrefix(line, name+"{")
			if !ok || !strings.Contains(rest, `cluster="`+n+`"`) {
				continue
			}
			matches := true
			for _, l := range labels {
				matches = matches && strings.Contains(rest, l)
			}
			if i := strings.LastIndexByte(rest, ' '); matches && i > 0 {
				v, _ := strconv.ParseFloat(rest[i+1:], 64)
				total += v
			}
		}
		return total
	}
	page := httpGet(t, firstMetrics)
	if deploys, configures := count(page, "clusterflow_operation_seconds_count", `kind="deploy"`), count(page, "clusterflow_script_seconds_count", `event="configure"`); deploys != 1 || configures != 1 {
		t.Fatalf("the first worker counted %v deploys and %v configures, want 1 of each:\n%s", deploys, configures, page)
	}
	if err := syscall.Kill(first.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, secondMetrics := startWorker(2)
	if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, "resize", n, "worker=2", "--task-queue", queue)
	agent := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(httpGet(t, secondMetrics))
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	waitFor(t, "the agent to run the new member's configure", func() bool { return agent("clusterflow_agent_running_scripts") == 1 })
	if err := os.Remove(filepath.Join(dir, "hold")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to run nothing and check both members", func() bool {
		return agent("clusterflow_agent_running_scripts") == 0 && agent("clusterflow_agent_probes") == 2 && agent("clusterflow_agent_up") == 1
	})
	waitFor(t, "the second worker to count the resize", func() bool {
		page = httpGet(t, secondMetrics)
		return count(page, "clusterflow_operation_seconds_count", `kind="update"`) == 1
	})
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"clusterflow_operation_seconds_count", `kind="deploy"`, 0},
		{"clusterflow_operation_seconds_count", `kind="update"`, 1},
		{"clusterflow_script_seconds_count", `event="configure"`, 1},
	} {
		if got := count(page, c.name, c.label); got != c.want {
			t.Errorf("the second worker counts %s{%s} %v, want %v", c.name, c.label, got, c.want)
		}
	}
	mustSucceed(t, "delete", n, "--task-queue", queue, "--wait")
}
