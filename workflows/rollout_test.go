package workflows_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

const rolloutSpec = `
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - name: worker
    members: 5
    dependsOn: [controller]
    startscript: s.sh
    events: [configure, addnodes, delnodes, teardown, upgrade]
    update: {canaries: 1, maxInFlight: 2, watch: 10m}
  - {name: edge, members: 1, dependsOn: [worker], startscript: s.sh}
`

// withWorkerEnv is the rollout spec with the worker role's env changed: a new revision.
func withWorkerEnv(t *testing.T, value string) spec.Cluster {
	return testSpec(t, strings.Replace(rolloutSpec, "    members: 5\n", "    members: 5\n    env: {HEAP: "+value+"}\n", 1))
}

// upgrades are the upgrade runs the fake saw, in order.
func upgrades(fake *fakeBackend) []string {
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var out []string
	for _, c := range fake.calls {
		if strings.HasPrefix(c, "upgrade ") {
			out = append(out, strings.TrimPrefix(c, "upgrade "))
		}
	}
	return out
}

func TestRolloutUpdatesTheChangedRoleInBatchesAfterACanary(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var seenAfterCanary, after workflows.ClusterStatus
	apply := updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, "4g"), By: "tester"})
	queryAt(t, env, time.Hour+5*time.Minute, &seenAfterCanary)
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if apply.refused != nil {
		t.Fatalf("apply refused: %v", apply.refused)
	}
	if res, _ := apply.result.(workflows.ChangeResult); res.Revision != 2 {
		t.Errorf("apply made revision %d, want 2", res.Revision)
	}
	got := upgrades(fake)
	if len(got) != 5 || got[0] != "c-worker-0" {
		t.Fatalf("upgrades %v: want the 5 workers, the canary c-worker-0 first", got)
	}
	if seenAfterCanary.Rollout == nil || seenAfterCanary.Phase != workflows.PhaseRollingOut {
		t.Fatalf("5m into the rollout: phase %s, rollout %+v", seenAfterCanary.Phase, seenAfterCanary.Rollout)
	}
	if r := seenAfterCanary.Rollout.Roles[0]; r.Role != "worker" || !slices.Equal(r.InWatch, []string{"c-worker-0"}) || r.Waiting != 4 {
		t.Errorf("5m into the rollout, worker: %+v; want the canary in watch and 4 waiting", r)
	}
	if after.Phase != workflows.PhaseReady || after.Revision != 2 || after.Rollout.State != workflows.RolloutDone {
		t.Fatalf("after: phase %s (%s), revision %d, rollout %+v", after.Phase, after.Message, after.Revision, after.Rollout)
	}
	for _, r := range after.Roles {
		for _, m := range r.Members {
			want := 1
			if r.Name == "worker" {
				want = 2
			}
			if m.Revision != want {
				t.Errorf("%s runs revision %d, want %d", m.Name, m.Revision, want)
			}
		}
	}
	if n := len(after.Revisions); n != 2 || after.Revisions[1].By != "tester" || !strings.Contains(after.Revisions[1].Change, "worker: env") {
		t.Errorf("revisions %+v", after.Revisions)
	}
}

func TestAFailedCanaryPausesTheRolloutAndUndoMovesOnlyIt(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Event == spec.EventUpgrade && run.Env["HEAP"] == "bad" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 1, StderrTail: "cannot start with HEAP=bad"}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	var paused, after workflows.ClusterStatus
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, "bad")})
	queryAt(t, env, 2*time.Hour, &paused)
	undo := updateAt(env, 2*time.Hour+time.Minute, workflows.RolloutUndoUpdate, workflows.UndoRequest{})
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if paused.Phase != workflows.PhaseRolloutPaused || paused.Rollout == nil || paused.Rollout.Member != "c-worker-0" {
		t.Fatalf("after the failed canary: phase %s (%s), rollout %+v", paused.Phase, paused.Message, paused.Rollout)
	}
	if canary := memberIn(paused, "c-worker-0"); canary == nil || canary.StderrTail == "" {
		t.Errorf("the canary's output is not in the status: %+v", canary)
	}
	if !strings.Contains(paused.Message, "c-worker-0") || !strings.Contains(paused.Message, "revision 2") {
		t.Errorf("the paused message does not name the canary and the revision: %s", paused.Message)
	}
	if undo.refused != nil {
		t.Fatalf("undo refused: %v", undo.refused)
	}
	if got := upgrades(fake); !slices.Equal(got, []string{"c-worker-0", "c-worker-0"}) {
		t.Errorf("upgrades %v: want the canary's failed one and its undo, no other member touched", got)
	}
	if after.Phase != workflows.PhaseReady || after.Revision != 3 {
		t.Errorf("after undo: phase %s (%s), revision %d", after.Phase, after.Message, after.Revision)
	}
}

func TestADownReportDuringTheWatchPausesTheRollout(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var paused, after workflows.ClusterStatus
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, "4g")})
	down := updateAt(env, time.Hour+2*time.Minute, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-0", Event: workflows.HealthDown, Source: "test"})
	queryAt(t, env, time.Hour+3*time.Minute, &paused)
	updateAt(env, time.Hour+4*time.Minute, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-0", Event: workflows.HealthUp, Source: "test"})
	resume := updateAt(env, time.Hour+5*time.Minute, workflows.RolloutResumeUpdate)
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if down.refused != nil || resume.refused != nil {
		t.Fatalf("refused: down %v, resume %v", down.refused, resume.refused)
	}
	if paused.Phase != workflows.PhaseRolloutPaused || paused.Rollout.Member != "c-worker-0" || !strings.Contains(paused.Rollout.Paused, "reported down") {
		t.Fatalf("after down in the watch: phase %s, rollout %+v", paused.Phase, paused.Rollout)
	}
	if r := paused.Rollout.Roles[0]; r.Waiting != 4 {
		t.Errorf("paused: %+v, want 4 workers waiting", r)
	}
	if got := upgrades(fake); len(got) != 5 {
		t.Errorf("upgrades after resume %v, want every worker once", got)
	}
	if after.Phase != workflows.PhaseReady || after.Rollout.State != workflows.RolloutDone {
		t.Errorf("after resume: phase %s (%s), rollout %+v", after.Phase, after.Message, after.Rollout)
	}
}

const restartSpec = `
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - name: worker
    members: 6
    dependsOn: [controller]
    startscript: s.sh
    events: [configure, addnodes, delnodes, teardown, restart]
    actions: [backup]
    update: {canaries: 1, maxInFlight: 2, watch: 1m}
`

func TestARollingRestartRestartsEachChosenMemberOnceByThePolicy(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	refused := updateAt(env, time.Hour, workflows.RestartUpdate, workflows.RestartRequest{Role: "controller"})
	started := updateAt(env, time.Hour+time.Minute, workflows.RestartUpdate, workflows.RestartRequest{Role: "worker"})
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, restartSpec)})
	if refused.refused == nil || !strings.Contains(refused.refused.Error(), "role controller does not list restart") {
		t.Errorf("restart of a role without restart: %v", refused.refused)
	}
	if started.refused != nil {
		t.Fatalf("restart refused: %v", started.refused)
	}
	var restarts []string
	fake.mu.Lock()
	for _, c := range fake.calls {
		if name, ok := strings.CutPrefix(c, "restart "); ok {
			restarts = append(restarts, name)
		}
	}
	fake.mu.Unlock()
	if len(restarts) != 6 || restarts[0] != "c-worker-0" {
		t.Errorf("restarts %v: want the 6 workers, c-worker-0 first", restarts)
	}
	if after.Phase != workflows.PhaseReady || after.Rollout == nil || !after.Rollout.Restart || after.Rollout.State != workflows.RolloutDone || after.Rollout.Roles[0].Updated != 6 {
		t.Errorf("after the restart: phase %s (%s), rollout %+v", after.Phase, after.Message, after.Rollout)
	}
	if after.Revision != 1 {
		t.Errorf("a restart made revision %d", after.Revision)
	}
}

func TestAnActionRunsOnTheChosenMembersWithItsParameters(t *testing.T) {
	fake := newFakeBackend()
	var runs []backend.ScriptRun
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Action == "" {
			return runner.Result{Outcome: runner.Exited}
		}
		fake.mu.Lock()
		runs = append(runs, run)
		fake.mu.Unlock()
		if run.Member.Name == "c-worker-3" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 2, StderrTail: "disk full"}
		}
		return runner.Result{Outcome: runner.Exited, StdoutTail: "backed up"}
	}
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	unknown := updateAt(env, time.Hour, workflows.RunActionUpdate, workflows.ActionRequest{Action: "compact"})
	badMember := updateAt(env, time.Hour, workflows.RunActionUpdate, workflows.ActionRequest{Action: "backup", Members: []string{"c-worker-9"}})
	asked := updateAt(env, time.Hour+time.Minute, workflows.RunActionUpdate, workflows.ActionRequest{
		Action: "backup", Members: []string{"c-worker-1", "c-worker-3"}, Params: []string{"target=s3://b", "level=2"},
	})
	queryAt(t, env, 2*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, restartSpec)})
	if unknown.refused == nil || !strings.Contains(unknown.refused.Error(), `declares action "compact"`) {
		t.Errorf("an unknown action: %v", unknown.refused)
	}
	if badMember.refused == nil || !strings.Contains(badMember.refused.Error(), `no member "c-worker-9"`) {
		t.Errorf("an unknown member: %v", badMember.refused)
	}
	if asked.refused != nil {
		t.Fatalf("action refused: %v", asked.refused)
	}
	if len(runs) != 2 || !slices.Equal(runs[0].Params, []string{"target=s3://b", "level=2"}) || string(runs[0].Event) != "backup" {
		t.Fatalf("action runs %+v; status %+v, phase %s (%s)", runs, after.Actions, after.Phase, after.Message)
	}
	a := after.Action(1)
	if a == nil || a.State != workflows.ActionDone || a.Ran != 2 || a.Succeeded != 1 || a.Failed != 1 {
		t.Fatalf("action status %+v", a)
	}
	if a.Results[0].Member != "c-worker-3" || a.Results[0].OK || a.Results[0].StderrTail != "disk full" || a.Results[1].StdoutTail != "backed up" {
		t.Errorf("results %+v", a.Results)
	}
	if m := memberIn(after, "c-worker-3"); m.State != workflows.MemberReady {
		t.Errorf("the member whose action failed is %s, want ready", m.State)
	}
	if after.Phase != workflows.PhaseReady {
		t.Errorf("after the action: phase %s (%s)", after.Phase, after.Message)
	}
}

const replaceSpec = `
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - name: worker
    members: 4
    dependsOn: [controller]
    startscript: s.sh
    update: {canaries: 1, maxInFlight: 2, watch: 1m}
`

func TestAReplaceRolloutSetsUpSuccessorsBeforeRemovingTheOld(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	apply := updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{
		Spec: testSpec(t, strings.Replace(replaceSpec, "    members: 4\n", "    members: 4\n    env: {HEAP: 4g}\n", 1)),
	})
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, replaceSpec)})
	if apply.refused != nil {
		t.Fatalf("apply refused: %v", apply.refused)
	}
	if after.Phase != workflows.PhaseReady || after.Rollout.State != workflows.RolloutDone {
		t.Fatalf("after: phase %s (%s), rollout %+v", after.Phase, after.Message, after.Rollout)
	}
	var names []string
	for _, m := range after.Role("worker").Members {
		names = append(names, fmt.Sprintf("%s@%d", m.Name, m.Revision))
	}
	if want := []string{"c-worker-4@2", "c-worker-5@2", "c-worker-6@2", "c-worker-7@2"}; !slices.Equal(names, want) {
		t.Errorf("workers %v, want %v", names, want)
	}
	fake.mu.Lock()
	calls := slices.Clone(fake.calls)
	fake.mu.Unlock()
	at := func(call string) int { return slices.Index(calls, call) }
	for old, successor := range map[string]string{"c-worker-0": "c-worker-4", "c-worker-1": "c-worker-5", "c-worker-3": "c-worker-7"} {
		if at("configure "+successor) < 0 || at("teardown "+old) < at("configure "+successor) {
			t.Errorf("%s was torn down before %s was set up: %v", old, successor, calls)
		}
	}
	if at("teardown c-worker-1") < at("teardown c-worker-0") || at("configure c-worker-5") < at("teardown c-worker-0") {
		t.Errorf("the canary's replacement did not come first, alone: %v", calls)
	}
}

// withWorkerScript is a spec with the worker role's startscript replaced by content.
func withWorkerScript(c spec.Cluster, content string) spec.Cluster {
	hash := spec.ContentHash([]byte(content))
	c.Roles = slices.Clone(c.Roles)
	c.Scripts = map[string]string{hash: content}
	for _, r := range c.Roles {
		c.Scripts[r.ScriptHash] = script
	}
	for i := range c.Roles {
		if c.Roles[i].Name == "worker" {
			c.Roles[i].ScriptHash, c.Roles[i].Startscript = hash, "worker-v2.sh"
		}
	}
	for h := range c.Scripts {
		if !slices.ContainsFunc(c.Roles, func(r spec.Role) bool { return r.ScriptHash == h }) {
			delete(c.Scripts, h)
		}
	}
	return c
}

func TestUndoGoesBackToAnOlderScript(t *testing.T) {
	fake := newFakeBackend()
	var scripts []string
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Event == spec.EventUpgrade {
			fake.mu.Lock()
			scripts = append(scripts, fmt.Sprintf("%s@%d:%s", run.Member.Name, run.Revision, run.ScriptHash[:8]))
			fake.mu.Unlock()
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	base := testSpec(t, strings.Replace(rolloutSpec, "watch: 10m", "watch: 0s", 1))
	v2 := withWorkerScript(base, "#!/bin/sh\necho v2\n")
	var after workflows.ClusterStatus
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: v2})
	// Three more revisions, each an env change: revision 1's settings, with its script the
	// spec no longer has, are among the newest five kept.
	for i := range 3 {
		next := v2
		next.Roles = slices.Clone(v2.Roles)
		for j := range next.Roles {
			if next.Roles[j].Name == "worker" {
				next.Roles[j].Env = map[string]string{"N": fmt.Sprint(i)}
			}
		}
		updateAt(env, time.Hour+time.Duration(i+1)*20*time.Minute, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: next})
	}
	undo := updateAt(env, 3*time.Hour, workflows.RolloutUndoUpdate, workflows.UndoRequest{ToRevision: 1})
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: base})
	if undo.refused != nil {
		t.Fatalf("undo to revision 1 refused: %v", undo.refused)
	}
	if after.Revision != 6 || after.Phase != workflows.PhaseReady {
		t.Fatalf("after undo: revision %d, phase %s (%s); workflow error %v", after.Revision, after.Phase, after.Message, env.GetWorkflowError())
	}
	orig := base.Roles[1].ScriptHash[:8]
	last := scripts[len(scripts)-5:]
	for _, s := range last {
		if !strings.HasSuffix(s, "@6:"+orig) {
			t.Errorf("the undo's upgrades %v do not run revision 1's script %s", last, orig)
			break
		}
	}
	if n := len(after.Revisions); n != 6 || !after.Revisions[0].Kept || after.Revisions[5].Change == "" || !strings.Contains(after.Revisions[5].Change, "undo to revision 1") {
		t.Errorf("revisions %+v", after.Revisions)
	}
}

func TestOnlyTheNewestRevisionsAreKeptForUndo(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	base := testSpec(t, strings.Replace(rolloutSpec, "watch: 10m", "watch: 0s", 1))
	for i := range 7 {
		updateAt(env, time.Hour+time.Duration(i)*15*time.Minute, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, fmt.Sprint(i))})
	}
	tooOld := updateAt(env, 3*time.Hour, workflows.RolloutUndoUpdate, workflows.UndoRequest{ToRevision: 2})
	kept := updateAt(env, 3*time.Hour+time.Minute, workflows.RolloutUndoUpdate, workflows.UndoRequest{ToRevision: 3})
	var after workflows.ClusterStatus
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: base})
	if tooOld.refused == nil || !strings.Contains(tooOld.refused.Error(), "the settings of revision 2 are no longer kept") {
		t.Errorf("undo to revision 2 of 8: %v", tooOld.refused)
	}
	if kept.refused != nil {
		t.Errorf("undo to revision 3 of 8: %v", kept.refused)
	}
	var keptNumbers []int
	for _, r := range after.Revisions {
		if r.Kept {
			keptNumbers = append(keptNumbers, r.Number)
		}
	}
	if after.Revision != 9 || !slices.Equal(keptNumbers, []int{4, 5, 6, 7, 8, 9}) {
		t.Errorf("revision %d, kept %v: want 9, the 5 before it and itself", after.Revision, keptNumbers)
	}
}

func TestRolesOfALevelThatSayParallelRollTogether(t *testing.T) {
	const parallelSpec = `
name: c
roles:
  - {name: a, members: 2, startscript: s.sh, events: [configure, upgrade], update: {parallel: true, watch: 10m}%s}
  - {name: b, members: 2, startscript: s.sh, events: [configure, upgrade], update: {parallel: true, watch: 10m}%s}
  - {name: c, members: 2, startscript: s.sh, events: [configure, upgrade], update: {watch: 10m}%s}
`
	env := newEnv(t, newFakeBackend())
	var during workflows.ClusterStatus
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: testSpec(t, fmt.Sprintf(parallelSpec, ", env: {V: '2'}", ", env: {V: '2'}", ", env: {V: '2'}"))})
	queryAt(t, env, time.Hour+5*time.Minute, &during)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, fmt.Sprintf(parallelSpec, "", "", ""))})
	watched := map[string][]string{}
	for _, r := range during.Rollout.Roles {
		watched[r.Role] = r.InWatch
	}
	if len(watched["a"]) != 1 || len(watched["b"]) != 1 || len(watched["c"]) != 0 {
		t.Errorf("5m in: watched %v; want a's and b's canaries together, c waiting its turn", watched)
	}
}

func TestAHealthPolicyChangeIsARevisionThatMovesNoMember(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	apply := updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{
		Spec: testSpec(t, strings.Replace(rolloutSpec, "    members: 5\n", "    members: 5\n    replaceAfter: 1m\n", 1)),
	})
	queryAt(t, env, 2*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if res, _ := apply.result.(workflows.ChangeResult); apply.refused != nil || res.Revision != 2 {
		t.Fatalf("apply: refused %v, result %+v", apply.refused, apply.result)
	}
	if got := upgrades(fake); len(got) != 0 || after.Rollout != nil || after.Phase != workflows.PhaseReady {
		t.Errorf("a health change moved members %v; rollout %+v, phase %s", got, after.Rollout, after.Phase)
	}
	if n := len(after.Revisions); n != 2 || !strings.Contains(after.Revisions[1].Change, "worker: health") {
		t.Errorf("revisions %+v", after.Revisions)
	}
}

// Maintenance holds a rollout as it holds any operation: no batch starts while it lasts,
// and the rollout goes on once it ends.
func TestMaintenanceHoldsARolloutUntilItEnds(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, "4g")})
	maintenanceAt(env, time.Hour+time.Minute, true) // the canary is in its 10m watch
	var heldUpgrades []string
	var held, after workflows.ClusterStatus
	queryAt(t, env, time.Hour+40*time.Minute, &held)
	env.RegisterDelayedCallback(func() { heldUpgrades = upgrades(fake) }, time.Hour+40*time.Minute)
	maintenanceAt(env, time.Hour+45*time.Minute, false)
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if len(heldUpgrades) != 1 || held.Phase != workflows.PhaseMaintenance {
		t.Errorf("during maintenance: phase %s, upgrades %v; want the canary's alone", held.Phase, heldUpgrades)
	}
	if got := upgrades(fake); len(got) != 5 || after.Phase != workflows.PhaseReady || after.Rollout.State != workflows.RolloutDone {
		t.Errorf("after maintenance: upgrades %v, phase %s (%s), rollout %+v", got, after.Phase, after.Message, after.Rollout)
	}
}

// A resize during a rollout applies at once: the new members are set up with the new
// revision, never upgraded, and the rollout goes on with the others.
func TestAResizeDuringARolloutSetsUpNewMembersWithTheNewRevision(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withWorkerEnv(t, "4g")})
	resize := updateAt(env, time.Hour+5*time.Minute, workflows.ResizeUpdate, workflows.ResizeRequest{Counts: []workflows.RoleCount{{Role: "worker", Members: 7}}})
	var after workflows.ClusterStatus
	queryAt(t, env, 4*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if resize.refused != nil {
		t.Fatalf("resize refused: %v", resize.refused)
	}
	got := upgrades(fake)
	slices.Sort(got)
	if want := []string{"c-worker-0", "c-worker-1", "c-worker-2", "c-worker-3", "c-worker-4"}; !slices.Equal(got, want) {
		t.Errorf("upgrades %v, want the 5 workers there before, once each", got)
	}
	for _, m := range after.Role("worker").Members {
		if m.Revision != 2 || m.State != workflows.MemberReady {
			t.Errorf("%s: %s on revision %d", m.Name, m.State, m.Revision)
		}
	}
	if after.Phase != workflows.PhaseReady || after.Role("worker").Ready != 7 {
		t.Errorf("after: phase %s (%s), %d workers ready", after.Phase, after.Message, after.Role("worker").Ready)
	}
}

func TestAFailedReplacementKeepsTheMemberItWasToReplace(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Event == spec.EventConfigure && run.Env["HEAP"] == "bad" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 1, StderrTail: "bad heap"}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	var paused, after workflows.ClusterStatus
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{
		Spec: testSpec(t, strings.Replace(replaceSpec, "    members: 4\n", "    members: 4\n    env: {HEAP: bad}\n", 1)),
	})
	queryAt(t, env, 2*time.Hour, &paused)
	undo := updateAt(env, 2*time.Hour+time.Minute, workflows.RolloutUndoUpdate, workflows.UndoRequest{})
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, replaceSpec)})
	if paused.Phase != workflows.PhaseRolloutPaused || paused.Rollout.Member != "c-worker-4" || !strings.Contains(paused.Rollout.Paused, "bad heap") {
		t.Fatalf("after the failed replacement: phase %s (%s), rollout %+v", paused.Phase, paused.Message, paused.Rollout)
	}
	var workers []string
	for _, m := range paused.Role("worker").Members {
		if m.State != workflows.MemberDeleted {
			workers = append(workers, fmt.Sprintf("%s=%s@%d", m.Name, m.State, m.Revision))
		}
	}
	if want := []string{"c-worker-0=ready@1", "c-worker-1=ready@1", "c-worker-2=ready@1", "c-worker-3=ready@1"}; !slices.Equal(workers, want) {
		t.Errorf("workers while paused %v, want %v: the canary kept, its failed successor gone", workers, want)
	}
	if slices.Contains(fake.Calls(), "teardown c-worker-0") {
		t.Error("the member whose replacement failed was torn down")
	}
	if undo.refused != nil || after.Phase != workflows.PhaseReady || after.Revision != 3 {
		t.Errorf("after undo: refused %v, phase %s (%s), revision %d", undo.refused, after.Phase, after.Message, after.Revision)
	}
}

func TestAnActionRunsOnAClusterWhoseSetupFailed(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Event == spec.EventConfigure && run.Member.Name == "c-worker-5" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 1}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	asked := updateAt(env, time.Hour, workflows.RunActionUpdate, workflows.ActionRequest{Action: "backup", Members: []string{"c-worker-0"}})
	var after workflows.ClusterStatus
	queryAt(t, env, 2*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, restartSpec)})
	if asked.refused != nil {
		t.Fatalf("action refused: %v", asked.refused)
	}
	if a := after.Action(1); a == nil || a.State != workflows.ActionDone || a.Succeeded != 1 || after.Phase != workflows.PhaseFailed {
		t.Errorf("phase %s, action %+v", after.Phase, a)
	}
}

// An undo of a revision that moved no member (a health change) makes a revision and no
// rollout, and answers all the same.
func TestUndoOfAHealthChangeAnswersWithoutARollout(t *testing.T) {
	env := newEnv(t, newFakeBackend())
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{
		Spec: testSpec(t, strings.Replace(rolloutSpec, "    members: 5\n", "    members: 5\n    replaceAfter: 1m\n", 1)),
	})
	undo := updateAt(env, 2*time.Hour, workflows.RolloutUndoUpdate, workflows.UndoRequest{})
	var after workflows.ClusterStatus
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, rolloutSpec)})
	if undo.refused != nil || after.Revision != 3 || after.Phase != workflows.PhaseReady {
		t.Errorf("undo: refused %v, revision %d, phase %s", undo.refused, after.Revision, after.Phase)
	}
	if res, ok := undo.result.(workflows.RolloutStatus); !ok || res.State != workflows.RolloutDone {
		t.Errorf("undo answered %#v", undo.result)
	}
}
