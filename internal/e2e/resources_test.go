package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// hogScript's configure tries to take more memory and more processes than its role's
// resources allow, and writes what it got: the memory hog's exit status, and how many of
// 100 background processes it could start. Every other event does nothing.
const hogScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
out="$CLUSTERFLOW_MEMBER_DIR/hog"
# tail -c holds what it keeps in memory: 300 MB, past a bound of 64Mi.
head -c 300000000 /dev/zero | tail -c 300000000 > /dev/null 2>&1
echo "memory $?" > "$out"
# A shell whose fork fails exits: the forks are tried in a subshell, which says how far it got.
( i=0; while [ $i -lt 100 ]; do sleep 60 & i=$((i+1)); echo $i > "$out.started"; done ) 2>/dev/null
echo "processes $(cat "$out.started")" >> "$out"
exit 0
`

// TestAMembersResourcesAreItsCgroups: a role's resources (cpus, memory, pids) bound its
// members on the local backend as on the docker backend, all of a member's processes
// together, in the member's cgroup: a member that takes more memory is killed by the
// kernel, one that starts more processes is refused them, and a cluster beside it comes up
// as usual. A role that sets none is held to the host's default process bound.
func TestAMembersResourcesAreItsCgroups(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, "")
	dir := filepath.Dir(specPath)
	hog := filepath.Join(dir, "hog.sh")
	if err := os.WriteFile(hog, []byte(hogScript), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mustSucceed(t, "deploy", "-f", write("hog.yaml", "name: hog\nroles:\n  - {name: h, members: 1, startscript: "+hog+
		", resources: {memory: 64Mi, pids: 40, cpus: 0.5}}\n"), "--wait")
	t.Cleanup(func() { cli(t, "delete", "hog", "--wait") })
	got, err := os.ReadFile(filepath.Join(clusterDir(dataDir, "hog"), "hog-h-0", "hog"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(got))
	if len(lines) != 4 || lines[0] != "memory" || lines[1] == "0" {
		t.Errorf("the memory hog past its 64Mi: %q; want it killed", got)
	}
	if n, _ := strconv.Atoi(lines[len(lines)-1]); len(lines) != 4 || n == 0 || n >= 40 {
		t.Errorf("processes started of 100, under pids 40: %q", got)
	}
	hogCgroup := runner.MemberCgroup(dataDir, filepath.Base(clusterDir(dataDir, "hog")), "hog-h-0")
	bounds, err := runner.BoundsOf(hogCgroup)
	if err != nil || bounds != (runner.Resources{CPUs: 0.5, Memory: 64 << 20, PIDs: 40}) {
		t.Errorf("hog-h-0's cgroup holds it to %+v (%v); want cpus 0.5, memory 64Mi, pids 40", bounds, err)
	}
	calm := filepath.Join(dir, "calm.sh")
	if err := os.WriteFile(calm, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, "deploy", "-f", write("beside.yaml", "name: beside\nroles:\n  - {name: c, members: 2, startscript: "+calm+"}\n"), "--wait")
	if st := statusJSON(t, "beside"); st.Phase != workflows.PhaseReady {
		t.Errorf("the cluster beside the hog is %s", st.Phase)
	}
	bounds, err = runner.BoundsOf(runner.MemberCgroup(dataDir, filepath.Base(clusterDir(dataDir, "beside")), "beside-c-0"))
	if err != nil || bounds.PIDs != 4096 {
		t.Errorf("a member of a role that sets no resources is held to %+v (%v); want the host's default of 4096 processes", bounds, err)
	}
	mustSucceed(t, "delete", "beside", "--wait")
	mustSucceed(t, "delete", "hog", "--wait")
	for _, c := range []string{"cpu", "memory", "pids"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "clusterflow")); err == nil {
			if left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, "clusterflow", "*", filepath.Base(clusterDir(dataDir, "hog")))); len(left) > 0 {
				t.Errorf("the deleted cluster's %s cgroups are left: %v", c, left)
			}
		}
	}
}

// hangingCheckScript's check hangs for an hour (until its timeout kills it); its other
// events succeed at once.
const hangingCheckScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = check ] && exec sleep 3600
exit 0
`

// TestOneClustersHungChecksLeaveAnotherClustersChecks: the checks of one cluster's 16
// members hang as long as a check may (spec.MaxProbeTimeout), holding the host's check
// slots; another cluster whose configure waits for its check (readyAfter, readyTimeout 30s)
// still comes up, on its share of the slots.
func TestOneClustersHungChecksLeaveAnotherClustersChecks(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newStack(t)
	specPath, _ := writeCluster(t, "")
	dir := filepath.Dir(specPath)
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hang := write("hang.sh", hangingCheckScript, 0o755)
	quick := write("quick.sh", "#!/bin/sh\nexit 0\n", 0o755)
	if res := s.cli("deploy", "-f", write("hung.yaml", "name: hung\nroles:\n  - {name: h, members: 16, startscript: "+hang+
		", events: [configure, check, teardown], probe: {every: 1s, timeout: 1m}}\n", 0o644), "--wait"); res.Code != 0 {
		t.Fatalf("deploy the hung cluster: %s", res)
	}
	// Its checks hold every slot they may (as many as its share, the rest waiting): their
	// number has stopped growing for 3 s.
	held, since := 0, time.Now()
	waitFor(t, "the hung cluster's checks to hold every slot they may", func() bool {
		if n := len(testenv.MemberProcesses(clusterDir(s.data, "hung"))); n != held {
			held, since = n, time.Now()
		}
		return held >= 4 && time.Since(since) > 3*time.Second
	})
	start := time.Now()
	if res := s.cli("deploy", "-f", write("waits.yaml", "name: waits\nroles:\n  - {name: w, members: 2, startscript: "+quick+
		", events: [configure, check, teardown], probe: {every: 1s, readyAfter: true, readyTimeout: 30s}}\n", 0o644), "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("a cluster whose configure waits for its check, beside hung checks: %s", res)
	}
	t.Logf("ready beside 16 hung checks (%d processes of them running) in %s", held, time.Since(start).Round(100*time.Millisecond))
	if st := s.status("waits"); st.Phase != workflows.PhaseReady {
		t.Errorf("the cluster beside the hung checks is %s", st.Phase)
	}
	for _, n := range []string{"waits", "hung"} {
		if res := s.cli("delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
}
