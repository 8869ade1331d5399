package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testlimit"
	"github.com/clusterflow/clusterflow/spec"
)

// probeScript counts its checks in the member's folder, and fails them while "sick" is there.
const probeScript = "if [ \"$1\" = --check ]; then echo x >> checks; [ ! -e sick ] || { echo not yet >&2; exit 1; }; exit 0; fi\necho run >> count\n"

// launchProbed launches body as activity id's run of event, with a probe of the same script.
func (f *fixture) launchProbed(id, event string, probe *spec.Probe) {
	f.t.Helper()
	sum := f.install("#!/bin/sh\n" + probeScript)
	l := f.launchOf(id, "t", sum)
	l.Event = event
	if probe != nil {
		l.Probe = &Probe{Probe: probe.WithDefaults(), Script: Script{SHA256: sum, Args: []string{"--check"}, Env: l.Script.Env}}
	}
	if _, err := f.client.Launch(context.Background(), l); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) checks() int {
	data, _ := os.ReadFile(filepath.Join(f.sandbox(), "checks"))
	return strings.Count(string(data), "x\n")
}

// A run that succeeds with a probe has its member checked every probe.every, by the agent
// and by the next one after a restart, until a run without one (a teardown) ends it.
func TestAProbedMemberIsCheckedAcrossRestartsUntilATeardown(t *testing.T) {
	f := newFixture(t)
	f.launchProbed("1", "configure", &spec.Probe{Every: time.Second})
	if res := f.waitResult("1"); res.Outcome != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("configure: %+v", res)
	}
	testlimit.Poll(t, "two checks", 10*time.Second, func() bool { return f.checks() >= 2 })
	f.stop()
	before := f.checks()
	f.start()
	testlimit.Poll(t, "checks by the restarted agent", 10*time.Second, func() bool { return f.checks() >= before+2 })

	f.launchProbed("2", "teardown", nil)
	f.waitResult("2")
	probes := filepath.Join(f.client.Dir, probesDir)
	testlimit.Poll(t, "the probe dropped", 10*time.Second, func() bool {
		entries, err := os.ReadDir(probes)
		return err == nil && len(entries) == 0
	})
	after := f.checks()
	time.Sleep(2500 * time.Millisecond) // two periods, in which no check may run
	if n := f.checks(); n > after+1 {   // one may have been under way
		t.Errorf("%d checks ran after the teardown", n-after)
	}
}

// A ready-after probe holds a run that exited 0 until a check passes, and fails it with the
// last check's result when none does within readyTimeout.
func TestAReadyAfterRunFailsWhenNoCheckPasses(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.sandbox(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.sandbox(), "sick"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.launchProbed("1", "configure", &spec.Probe{Every: time.Second, ReadyAfter: true, ReadyTimeout: 2 * time.Second})
	res := f.waitResult("1")
	if res.Outcome != runner.NotReady || !strings.Contains(res.Detail, "its check did not pass within readyTimeout 2s: exited with status 1: not yet") {
		t.Errorf("result %+v", res)
	}
	if err := ResultError("configure", time.Minute, res); err == nil || !strings.Contains(err.Error(), "configure exited with status 0, but its check did not pass") {
		t.Errorf("the activity's error: %v", err)
	}
	if n := f.checks(); n < 2 {
		t.Errorf("%d checks before giving up, want one every second for two seconds", n)
	}
}

// An agent stopped while a ready-after run waits for its check leaves the run unfinished:
// the next agent waits again, and the run succeeds once a check passes, run once.
func TestAReadyAfterWaitOutlivesAnAgentRestart(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.sandbox(), 0o755); err != nil {
		t.Fatal(err)
	}
	sick := filepath.Join(f.sandbox(), "sick")
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.launchProbed("1", "configure", &spec.Probe{Every: time.Second, ReadyAfter: true, ReadyTimeout: time.Minute})
	testlimit.Poll(t, "a failed check of the ready-after wait", 10*time.Second, func() bool { return f.checks() >= 1 })
	f.stop()
	if rec := f.record("1"); rec.Result != nil {
		t.Fatalf("a run still waiting for its check has a result: %+v", rec.Result)
	}
	if err := os.Remove(sick); err != nil {
		t.Fatal(err)
	}
	f.start()
	if res := f.waitResult("1"); res.Outcome != runner.Exited || res.ExitCode != 0 {
		t.Errorf("result %+v, want the configure done once its check passed", res)
	}
	if n := f.runs(); n != 1 {
		t.Errorf("the configure ran %d times, want once", n)
	}
}
