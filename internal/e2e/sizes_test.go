package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/histories"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/internal/testlimit"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// The size matrix: clusters of every shape the contract allows, deployed, grown and shrunk
// through the built CLI with real scripts, each recording what it was told. Every member
// configures once; every member that stays hears exactly one addnodes (and later one
// delnodes) per role that changed, naming exactly the members it did not know (knew); and
// no history, event or workflow task passes the bounds the reference states (docs/reference.md).

// sizeScript records one line a run: the member and event and, for addnodes and delnodes,
// the role it was told of and a digest of the nodes' names, read from its arguments as any
// script would (--nodes a,b or, past 64 KiB, --nodes-file FILE: names in ordinal order).
const sizeScript = `#!/bin/sh
case "$CLUSTERFLOW_EVENT" in
addnodes|delnodes)
  if [ "$4" = --nodes-file ]; then sum=$(sha256sum < "$5"); else sum=$(printf '%s\n' "$5" | tr , '\n' | sha256sum); fi
  echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT $3 ${sum%% *}" >> "$TRACE" ;;
*)
  echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE" ;;
esac
`

// sizeCase is one row of the matrix: a spec (SCRIPT and TRACE_FILE stand for the recording
// script and its trace), then member counts to grow to, then to shrink to.
type sizeCase struct {
	name         string
	spec         string
	grow, shrink map[string]int
	// noTeardown: the roles do not subscribe to teardown, which this case does not test.
	noTeardown bool
}

func TestSizesLongNames(t *testing.T) {
	guard(t)
	a, b := strings.Repeat("a", 63), "b"+strings.Repeat("-x", 31)
	runSizeCase(t, sizeCase{
		name: "names63",
		spec: fmt.Sprintf(`
name: names63
roles:
  - {name: %s, members: 3, startscript: SCRIPT, env: {TRACE: TRACE_FILE}}
  - {name: %s, members: 60, dependsOn: [%s], startscript: SCRIPT, env: {TRACE: TRACE_FILE}}
`, a, b, a),
		grow:   map[string]int{a: 5, b: 90},
		shrink: map[string]int{a: 3, b: 60},
	})
}

// A role wide enough for batches of 250, grown past maxInFlight at once. The full size
// (bench/sizes.sh) is 1,500 members grown by 1,000 with short names, about 6,000 script
// runs; the suite's 600 grown by 550 crosses the same bounds, 5 batches and 550 members in
// flight against 500, and with the longest names (132 characters, not 11) its every list,
// page and notice is larger.
func TestSizesWideRoleInBatches(t *testing.T) {
	guardFor(t, sizeLimit())
	if fullSizes() {
		runSizeCase(t, sizeCase{
			name: "wide",
			spec: `
name: wide
roles:
  - {name: w, members: 1500, maxInFlight: 500, startscript: SCRIPT, events: [configure, addnodes, delnodes], env: {TRACE: TRACE_FILE}}
`,
			grow:       map[string]int{"w": 2500},
			shrink:     map[string]int{"w": 1500},
			noTeardown: true,
		})
		return
	}
	name, role := longName("wide"), longName("w")
	runSizeCase(t, sizeCase{
		name: name,
		spec: fmt.Sprintf(`
name: %s
roles:
  - {name: %s, members: 600, maxInFlight: 500, startscript: SCRIPT, events: [configure, addnodes, delnodes], env: {TRACE: TRACE_FILE}}
`, name, role),
		grow:       map[string]int{role: 1150},
		shrink:     map[string]int{role: 600},
		noTeardown: true,
	})
}

// The role's env at its limit, 64 KiB as JSON text (TRACE, and a certificate-sized value),
// with its members set up at once: 300 of them in the suite (19 MB of env if each carried
// it, past every limit of Temporal), 500 at full size.
func TestSizesEnvAtItsLimit(t *testing.T) {
	guardFor(t, sizeLimit())
	members, grown := 300, 360
	if fullSizes() {
		members, grown = 500, 600
	}
	runSizeCase(t, sizeCase{
		name: "envlimit",
		spec: fmt.Sprintf(`
name: envlimit
roles:
  - {name: w, members: %d, maxInFlight: 500, startscript: SCRIPT, env: {TRACE: TRACE_FILE, CERT: %s}}
`, members, strings.Repeat("c", 64<<10-400)),
		grow:   map[string]int{"w": grown},
		shrink: map[string]int{"w": members},
	})
}

func TestSizesThreeRolesNotified(t *testing.T) {
	guard(t)
	runSizeCase(t, sizeCase{
		name: "threeroles",
		spec: `
name: threeroles
roles:
  - {name: ctl, members: 2, startscript: SCRIPT, env: {TRACE: TRACE_FILE}}
  - {name: mid, members: 30, dependsOn: [ctl], startscript: SCRIPT, env: {TRACE: TRACE_FILE}}
  - {name: edge, members: 20, dependsOn: [mid], startscript: SCRIPT, env: {TRACE: TRACE_FILE}}
`,
		grow:   map[string]int{"ctl": 3, "mid": 50, "edge": 40},
		shrink: map[string]int{"ctl": 2, "mid": 30, "edge": 20},
	})
}

// The three failures of the issue that asked for bounded payloads, on the code before it:
// a resize of 400 members with a long role name to 1,400 told none of the survivors; one
// from 200 to 500 wedged the cluster workflow; a deploy of 250 members at once with a
// 20 KB env value failed. The first two failed as survivors × new names: 400 × 1,000 names of about 40 characters
// (16 MB) and 200 × 300 (2.6 MB). The suite runs them with the longest names, 132
// characters, at 120 × 400 (6.3 MB) and 100 × 300 (4 MB), past the same limits with fewer
// script runs; bench/sizes.sh runs them as they were found.
func TestResizeOfALongRoleNameTellsEverySurvivor(t *testing.T) {
	guardFor(t, sizeLimit())
	name, role, from, to := longName("longrole"), longName("worker-with-a-long-role-name"), 120, 520
	if fullSizes() {
		name, role, from, to = "longrole", "worker-with-a-long-role-name", 400, 1400
	}
	runSizeCase(t, sizeCase{
		name:   name,
		spec:   fmt.Sprintf("name: %s\nroles:\n  - {name: %s, members: %d, maxInFlight: 500, startscript: SCRIPT, env: {TRACE: TRACE_FILE}}\n", name, role, from),
		grow:   map[string]int{role: to},
		shrink: nil,
	})
}

func TestResizeToFiveHundredDoesNotWedge(t *testing.T) {
	guardFor(t, sizeLimit())
	name, role, from := longName("fivehundred"), longName("worker-with-a-long-role-name"), 100
	if fullSizes() {
		name, role, from = "fivehundred", "worker-with-a-long-role-name", 200
	}
	runSizeCase(t, sizeCase{
		name:   name,
		spec:   fmt.Sprintf("name: %s\nroles:\n  - {name: %s, members: %d, startscript: SCRIPT, env: {TRACE: TRACE_FILE}}\n", name, role, from),
		grow:   map[string]int{role: from + 300},
		shrink: nil,
	})
}

func TestACertificateSizedEnvWithManyMembersInFlightDeploys(t *testing.T) {
	guard(t)
	runSizeCase(t, sizeCase{
		name: "bigenv",
		spec: fmt.Sprintf("name: bigenv\nroles:\n  - {name: w, members: 250, maxInFlight: 250, startscript: SCRIPT, env: {TRACE: TRACE_FILE, CERT: %s}}\n",
			strings.Repeat("k", 20<<10)),
	})
}

// fullSizes says the size matrix runs at the sizes its cases were found at, as
// bench/sizes.sh runs it (testlimit.BenchEnv); the suite runs each at the size that proves
// its class, past the same bounds with fewer script runs.
func fullSizes() bool { return testlimit.Benching() }

// sizeLimit is a size case's guard: the usual one in the suite, and twice it at full size
// (the 1,500-member case alone took 168 s on a machine with slow process starts).
func sizeLimit() time.Duration {
	if fullSizes() {
		return 2 * testlimit.TestLimit
	}
	return testlimit.TestLimit
}

// longName pads prefix to the longest name a cluster or role may have, 63 characters, so
// that a member's name is as long as names get (132 characters) and every list of names
// as large as it can be for its count.
func longName(prefix string) string {
	return prefix + "-" + strings.Repeat("x", 62-len(prefix))
}

// runSizeCase deploys the case's cluster, grows it, shrinks it, checks every run and every
// bound at each step, and deletes it.
func runSizeCase(t *testing.T, tc sizeCase) {
	t.Helper()
	start := time.Now()
	dir := t.TempDir()
	script := filepath.Join(dir, "record.sh")
	trace := filepath.Join(dir, "trace.log")
	if err := os.WriteFile(script, []byte(sizeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "cluster.yaml")
	spec := strings.NewReplacer("SCRIPT", script, "TRACE_FILE", trace).Replace(tc.spec)
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runFor(t, 150*time.Second, "deploy", "-f", specPath, "--wait", "--timeout", "140s"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	before := statusJSON(t, tc.name)
	counts := map[string]int{}
	for _, r := range before.Roles {
		counts[r.Name] = r.Desired
	}
	lines := readLines(t, trace)
	expectOnce(t, lines, "configure", memberSet(before))
	checkSizeBounds(t, workflows.ClusterWorkflowID(tc.name))

	mark := len(lines)
	t.Logf("%s: deployed %d members", time.Since(start).Round(time.Millisecond), len(memberSet(before)))
	if tc.grow != nil {
		resize(t, tc.name, tc.grow)
		t.Logf("%s: grown", time.Since(start).Round(time.Millisecond))
		grown := statusJSON(t, tc.name)
		expectReady(t, grown, tc.grow)
		lines = readLines(t, trace)
		added := diffMembers(grown, before)
		expectOnce(t, lines[mark:], "configure", added)
		expectTold(t, lines[mark:], "addnodes", grown, memberSet(before), added)
		checkSizeBounds(t, workflows.ClusterWorkflowID(tc.name))
		mark, before = len(lines), grown
	}
	if tc.shrink != nil {
		resize(t, tc.name, tc.shrink)
		t.Logf("%s: shrunk", time.Since(start).Round(time.Millisecond))
		shrunk := statusJSON(t, tc.name)
		expectReady(t, shrunk, tc.shrink)
		lines = readLines(t, trace)
		removed := diffMembers(before, shrunk)
		if !tc.noTeardown {
			expectOnce(t, lines[mark:], "teardown", removed)
		}
		expectTold(t, lines[mark:], "delnodes", shrunk, memberSet(shrunk), removed)
		checkSizeBounds(t, workflows.ClusterWorkflowID(tc.name))
	}
	if res := runFor(t, 150*time.Second, "delete", tc.name, "--wait", "--timeout", "140s"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
}

// resize sets the counts and waits for the cluster to reach them.
func resize(t *testing.T, name string, counts map[string]int) {
	t.Helper()
	args := []string{"resize", name}
	for _, role := range slices.Sorted(maps.Keys(counts)) {
		args = append(args, fmt.Sprintf("%s=%d", role, counts[role]))
	}
	if res := runFor(t, 150*time.Second, append(args, "--wait", "--timeout", "140s")...); res.Code != 0 {
		t.Fatalf("%s: %s", strings.Join(args, " "), res)
	}
}

func expectReady(t *testing.T, s workflows.ClusterStatus, counts map[string]int) {
	t.Helper()
	if s.Phase != workflows.PhaseReady {
		t.Errorf("phase %s (%s), want ready", s.Phase, s.Message)
	}
	for role, n := range counts {
		r := s.Role(role)
		if r == nil || r.Desired != n || r.Ready != n || r.MemberCount != n || len(r.Members) != n {
			t.Errorf("role %s: %+v, want %d members ready", role, r, n)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// memberSet maps each member of the status to its role.
func memberSet(s workflows.ClusterStatus) map[string]string {
	out := map[string]string{}
	for _, r := range s.Roles {
		for _, m := range r.Members {
			out[m.Name] = r.Name
		}
	}
	return out
}

// diffMembers lists the members of a that b does not have, with their roles.
func diffMembers(a, b workflows.ClusterStatus) map[string]string {
	out := memberSet(a)
	for name := range memberSet(b) {
		delete(out, name)
	}
	return out
}

// expectOnce checks that exactly the given members ran the event, each once.
func expectOnce(t *testing.T, lines []string, event string, members map[string]string) {
	t.Helper()
	ran := map[string]int{}
	for _, line := range lines {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == event {
			ran[f[0]]++
		}
	}
	bad := 0
	for name := range members {
		if ran[name] != 1 {
			if bad++; bad <= 3 {
				t.Errorf("%s ran %s %d times, want once", name, event, ran[name])
			}
		}
	}
	for name, n := range ran {
		if _, ok := members[name]; !ok {
			if bad++; bad <= 3 {
				t.Errorf("%s ran %s %d times, and was not to", name, event, n)
			}
		}
	}
	if bad > 3 {
		t.Errorf("... %d members wrong in all", bad)
	}
}

// expectTold checks that every member of listeners in s ran the event once per role of
// nodes, told of exactly that role's nodes, and that no other member ran it.
func expectTold(t *testing.T, lines []string, event string, s workflows.ClusterStatus, listeners, nodes map[string]string) {
	t.Helper()
	byRole := map[string][]string{}
	for name, role := range nodes {
		byRole[role] = append(byRole[role], name)
	}
	want := map[string]string{} // "member role" -> digest
	for name := range listeners {
		for role, names := range byRole {
			want[name+" "+role] = digest(names)
		}
	}
	got := map[string][]string{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 4 && f[1] == event {
			key := f[0] + " " + f[2]
			got[key] = append(got[key], f[3])
		}
	}
	bad := 0
	for key, w := range want {
		if g := got[key]; len(g) != 1 || g[0] != w {
			if bad++; bad <= 3 {
				t.Errorf("%s: %s told %v (digest), want once %s", key, event, g, w)
			}
		}
	}
	for key, g := range got {
		if _, ok := want[key]; !ok {
			if bad++; bad <= 3 {
				t.Errorf("%s: %s told %v, and was not to be told", key, event, g)
			}
		}
	}
	if bad > 3 {
		t.Errorf("... %d wrong in all, of %d %s runs expected", bad, len(want), event)
	}
}

// digest is what sizeScript writes of a list of names: the SHA-256 of the names in ordinal
// order, a line each, which is how --nodes and --nodes-file give them.
func digest(names []string) string {
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) // one role: longer ordinals come later
	})
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n") + "\n"))
	return hex.EncodeToString(sum[:])
}

// checkSizeBounds reads every run of the workflows whose IDs start with prefix (a cluster
// and its role children) and fails on a history, an event or a workflow task past the
// bounds the README states (histories.Bounds).
func checkSizeBounds(t *testing.T, prefix string) histories.Sizes {
	t.Helper()
	c, err := testenv.Dial(server.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sizes, err := histories.Measure(ctx, c, "default", fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", prefix, sizes)
	if !sizes.Within(histories.Bounds) {
		t.Errorf("past the bounds %+v: %s", histories.Bounds, sizes)
	}
	return sizes
}

// Every limit of the contract is refused up front, with its field, by the CLI, by the
// cluster's update validators (here sent by a raw SDK call, as a program might) and by the
// gateway; a refusal names a few members and counts the rest; and none of it reaches the
// cluster's history.
func TestLimitsAreRefusedWithTheirFieldAndChangeNothing(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "limits"
	specPath, _ := writeCluster(t, "name: limits\nroles:\n  - {name: w, members: 12, startscript: trace.sh, env: {TRACE: TRACE_FILE}}\n")
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := startGateway(t, cliEnv)
	id := workflows.ClusterWorkflowID(n)
	events := countEvents(t, id)

	bigEnv := writeSpec(t, specPath, "bigenv.yaml", fmt.Sprintf("name: limits\nroles:\n  - {name: w, members: 12, startscript: trace.sh, env: {BIG: %s}}\n", strings.Repeat("x", 70<<10)))
	many := writeSpec(t, specPath, "many.yaml", "name: limits\nroles:\n  - {name: w, members: 30000, startscript: trace.sh}\n")
	long := strings.Repeat("r", 1100)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resize", n, "w=3000000"}, "w=3000000 refused: a role has at most 20000 members"},
		{[]string{"apply", "-f", bigEnv}, "roles[0].env: is 71 KiB (names and values); a role's env is limited to 64 KiB"},
		{[]string{"deploy", "-f", bigEnv}, "roles[0].env: is 71 KiB"},
		{[]string{"apply", "-f", many}, "roles[0].members: is 30000; a role has at most 20000 members"},
		{[]string{"signal", n, n + "-w-1", "down", "--reason", long}, "reason: is 1100 bytes; at most 1024"},
		{[]string{"signal", n, n + "-w-1", "down", "--source", long}, "source: is 1100 bytes; at most 1024"},
		{[]string{"signal", n, "limits-w-99", "down"}, `cluster limits has no member "limits-w-99" (its members: limits-w-0, limits-w-1, limits-w-2, limits-w-3, limits-w-4 and 7 more)`},
	} {
		res := cli(t, tc.args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%s: want exit 2 saying %q, got %s", strings.Join(tc.args[:min(3, len(tc.args))], " "), tc.want, res)
		}
	}

	// The validators, past the CLI: a raw update with an env past its limit, and a member
	// event with a reason past its limit.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	current := statusJSON(t, n)
	if current.Generation != 1 {
		t.Fatalf("generation %d before the raw updates", current.Generation)
	}
	spec := loadSpec(t, specPath)
	spec.Roles[0].Env = map[string]string{"BIG": strings.Repeat("x", 70<<10)}
	for _, u := range []struct {
		name string
		arg  any
		want string
	}{
		{workflows.ApplyUpdate, workflows.ApplyRequest{Spec: spec}, "apply refused: roles[0].env: is 71 KiB"},
		{workflows.ResizeUpdate, workflows.ResizeRequest{Counts: []workflows.RoleCount{{Role: "w", Members: 20001}}}, "w=20001 refused: a role has at most 20000 members"},
		{workflows.MemberEventUpdate, workflows.MemberEvent{Member: n + "-w-1", Event: workflows.HealthDown, Reason: long}, "member-event refused: reason: is 1100 bytes; at most 1024"},
	} {
		handle, err := server.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: u.name, Args: []any{u.arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = handle.Get(ctx, nil)
		}
		if err == nil || !strings.Contains(err.Error(), u.want) {
			t.Errorf("raw %s: want refused saying %q, got %v", u.name, u.want, err)
		}
	}

	// The gateway, before Temporal is asked.
	code, out := g.postEvent(t, n, n+"-w-1", fmt.Sprintf(`{"event":"down","reason":%q}`, long))
	if code != 400 || !strings.Contains(out, "reason: is 1100 bytes; at most 1024") {
		t.Errorf("gateway event with a long reason: %d %s", code, out)
	}
	var alerts []string
	for i := range 1001 {
		alerts = append(alerts, fmt.Sprintf(`{"status":"firing","labels":{"clusterflow_cluster":%q,"clusterflow_member":"%s-w-%d"}}`, n, n, i%12))
	}
	code, _, out = g.do(t, "POST", "/v1/alertmanager", g.events, "application/json", []byte(`{"version":"4","alerts":[`+strings.Join(alerts, ",")+`]}`))
	if code != 400 || !strings.Contains(out, "alerts: 1001 in one notification; at most 1000") {
		t.Errorf("gateway notification of 1001 alerts: %d %s", code, out)
	}

	if after := countEvents(t, id); after != events {
		t.Errorf("the refusals wrote %d events to the cluster's history", after-events)
	}
	if s := statusJSON(t, n); s.Generation != 1 || s.Phase != workflows.PhaseReady || s.Role("w").Ready != 12 {
		t.Errorf("after the refusals: generation %d, phase %s, %d ready", s.Generation, s.Phase, s.Role("w").Ready)
	}
	mustSucceed(t, "delete", n, "--wait")
}

// loadSpec reads a spec as deploy does.
func loadSpec(t *testing.T, path string) spec.Cluster {
	t.Helper()
	c, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
