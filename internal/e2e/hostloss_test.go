package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// Losing a host at any moment of a deploy: three hosts in network namespaces, a cluster of
// three levels whose configures take 2-4 s, and every process of one host (worker, agent,
// scripts) killed at a random moment 1-9 s into the deploy. Each trial must end ready
// without the dead host, well within the host timeout, replaceAfter and the setup time
// (never waiting out the five minutes a lost host's queue used to hold a member); every
// member is configured once on its final host; no member hears the same addnodes or
// delnodes twice; and when the host comes back, its stale sandboxes go.

// lossScript records each run's start and end with the host it ran on; a configure takes
// 2-4 s.
const lossScript = `#!/bin/sh
echo "start $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT $CLUSTERFLOW_HOST $*" >> "$TRACE"
[ "$CLUSTERFLOW_EVENT" != configure ] || sleep "$(( $(od -An -N1 -tu1 /dev/urandom) % 3 + 2 ))"
echo "end $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT $CLUSTERFLOW_HOST $*" >> "$TRACE"
`

const lossSpec = `
name: NAME
reconcileEvery: 5s
roles:
  - {name: controller, cardinality: "1", startscript: SCRIPT, env: {TRACE: TRACE_FILE}, replaceAfter: 5s, heartbeatTimeout: 10s}
  - {name: worker, members: 6, dependsOn: [controller], startscript: SCRIPT, env: {TRACE: TRACE_FILE}, replaceAfter: 5s, heartbeatTimeout: 10s, placement: {maxPerHost: 3}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: SCRIPT, env: {TRACE: TRACE_FILE}, replaceAfter: 5s, heartbeatTimeout: 10s, placement: {maxPerHost: 1}}
`

func TestLosingAHostAtAnyMomentOfADeploy1(t *testing.T) {
	t.Parallel()
	guard(t)
	hostLossTrials(t, 1, 2)
}
func TestLosingAHostAtAnyMomentOfADeploy2(t *testing.T) {
	t.Parallel()
	guard(t)
	hostLossTrials(t, 2, 2)
}
func TestLosingAHostAtAnyMomentOfADeploy3(t *testing.T) {
	t.Parallel()
	guard(t)
	hostLossTrials(t, 3, 2)
}
func TestLosingAHostAtAnyMomentOfADeploy4(t *testing.T) {
	t.Parallel()
	guard(t)
	hostLossTrials(t, 4, 2)
}
func TestLosingAHostAtAnyMomentOfADeploy5(t *testing.T) {
	t.Parallel()
	guard(t)
	hostLossTrials(t, 5, 2)
}

// hostLossTrials runs trials on a fleet of its own; set is its share of the ten trials.
func hostLossTrials(t *testing.T, set, trials int) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, uint64(set)))
	t.Logf("seed %d", seed)
	f := newFleet(t, "h1", "h2", "h3")
	hosts := []string{"h1", "h2", "h3"}
	for trial := range trials {
		name := fmt.Sprintf("loss%d-%d", set, trial)
		dead := hosts[r.IntN(len(hosts))]
		after := time.Second + time.Duration(r.Int64N(int64(8*time.Second)))
		trace := deployLossCluster(t, f, name)
		time.Sleep(after)
		killed := time.Now()
		f.killHost(dead)
		// Ready without the dead host: within its loss (1.25 host timeouts), replaceAfter for
		// the members that were ready there, and a setup again, with room for a busy machine.
		var s workflows.ClusterStatus
		waitUpTo(t, 90*time.Second, fmt.Sprintf("%s ready without %s (killed %s into the deploy)", name, dead, after.Round(time.Millisecond)), func() bool {
			s = f.status(name)
			return s.Phase == workflows.PhaseReady && s.Role("worker").Ready == 6 && s.Role("edge").Ready == 2 && s.Role("controller").Ready == 1 &&
				!slices.ContainsFunc(placements(s), func(p string) bool { return strings.Contains(p, "@"+dead+"=") })
		})
		t.Logf("trial %s: %s killed %s into the deploy; ready without it %s later", name, dead, after.Round(time.Millisecond), time.Since(killed).Round(100*time.Millisecond))
		checkLossTrace(t, name, readLines(t, trace), s)

		// Back, the host loses the sandboxes left there: every member lives elsewhere.
		f.startHost(dead)
		folder := clusterDir(f.hosts[dead].data, name)
		waitFor(t, "the stale sandboxes on "+dead+" removed", func() bool {
			entries, _ := os.ReadDir(folder)
			return !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), name+"-") })
		})
		if res := f.cli("delete", name, "--wait"); res.Code != 0 {
			t.Fatalf("delete %s: %s", name, res)
		}
	}
}

// deployLossCluster writes the trials' script and the spec of a cluster of that name, and
// starts its deploy; it returns the file where the scripts record their runs.
func deployLossCluster(t *testing.T, f *fleet, name string) (trace string) {
	t.Helper()
	dir := t.TempDir()
	script, trace := filepath.Join(dir, "loss.sh"), filepath.Join(dir, "trace.log")
	if err := os.WriteFile(script, []byte(lossScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(specPath, []byte(strings.NewReplacer("NAME", name, "SCRIPT", script, "TRACE_FILE", trace).Replace(lossSpec)), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := f.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy %s: %s", name, res)
	}
	return trace
}

// checkLossTrace checks a trial from its scripts' own record: every member of the final
// status configured once on its final host, and no notification run twice.
func checkLossTrace(t *testing.T, name string, lines []string, s workflows.ClusterStatus) {
	t.Helper()
	ended := map[string]int{}
	notified := map[string]int{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "end" {
			continue
		}
		switch f[2] {
		case "configure":
			ended[f[1]+"@"+f[3]]++
		case "addnodes", "delnodes":
			notified[strings.Join(append([]string{f[1], f[2]}, f[4:]...), " ")]++
		}
	}
	for _, r := range s.Roles {
		for _, m := range r.Members {
			if n := ended[m.Name+"@"+m.Host]; n != 1 {
				t.Errorf("%s: %s configured %d times on its host %s, want once", name, m.Name, n, m.Host)
			}
		}
	}
	for run, n := range notified {
		if n > 1 {
			t.Errorf("%s: %q ran %d times", name, run, n)
		}
	}
}

// A host is lost only once it has been unheard of for its whole timeout: cuts of its link
// of 50%, 75% and 90% of --host-timeout never make it lost, and one of 150% always does,
// between one and 1.25 timeouts into the cut (the lease's window) and a little more for the
// server to notice.
func TestAHostIsLostOnlyAfterItsTimeout(t *testing.T) {
	t.Parallel()
	guard(t)
	timeout := 10 * time.Second
	f := newFleetWith(t, timeout, "h1", "h2")
	state := func() workflows.HostState {
		for _, h := range f.hostList() {
			if h.Name == "h2" {
				return h.State
			}
		}
		return ""
	}
	for _, share := range []float64{0.5, 0.75, 0.9} {
		cut := time.Duration(share * float64(timeout))
		f.hosts["h2"].net.Cut()
		for end := time.Now().Add(cut); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if st := state(); st != workflows.HostReady {
				t.Errorf("a cut of %s (%.0f%% of the host timeout): h2 went %s", cut, share*100, st)
				break
			}
		}
		f.hosts["h2"].net.Restore()
		time.Sleep(2 * time.Second) // what the lease sends once the link is back
		if st := state(); st != workflows.HostReady {
			t.Errorf("after a cut of %s: h2 is %s", cut, st)
		}
	}
	cut := timeout + timeout/2
	f.hosts["h2"].net.Cut()
	started := time.Now()
	lostAt := time.Duration(0)
	for time.Since(started) < cut {
		if state() == workflows.HostLost {
			lostAt = time.Since(started)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.hosts["h2"].net.Restore()
	t.Logf("a cut of %s: h2 lost %s into it", cut, lostAt.Round(10*time.Millisecond))
	switch {
	case lostAt == 0:
		t.Errorf("a cut of %s (150%% of the host timeout) never made h2 lost", cut)
	case lostAt < timeout:
		t.Errorf("h2 was lost %s into the cut, before its timeout of %s", lostAt, timeout)
	}
	f.waitForHosts("h2 back", func(hs []workflows.HostDocument) bool { return slices.Contains(hostStates(hs), "h2=ready") })
}

// The example app runs across hosts: its controller serves its registry on its host's
// address, and workers on the other hosts register over the network.
func TestTheExampleRunsAcrossHosts(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2", "h3")
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if res := f.cli("deploy", "-f", filepath.Join(root, "examples/registry/cluster.yaml"), "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("deploy the example: %s", res)
	}
	s := f.status("demo")
	var workerHosts []string
	for _, m := range s.Role("worker").Members {
		workerHosts = append(workerHosts, m.Host)
	}
	slices.Sort(workerHosts)
	if !slices.Equal(workerHosts, []string{"h1", "h2", "h3"}) {
		t.Errorf("workers on %v, want one on each host", workerHosts)
	}
	if res := f.cli("delete", "demo", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
}
