package spec

import (
	"strings"
	"testing"
	"time"
)

// A probe is read as given, defaults where left out, and each problem is named by its field.
func TestParseReadsProbe(t *testing.T) {
	c, err := Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, events: [configure, check], probe: {every: 1s, failures: 2, readyAfter: true}}\n"), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Roles[0]
	want := Probe{Every: time.Second, Timeout: DefaultProbeTimeout, Failures: 2, Successes: DefaultProbeSuccesses, ReadyAfter: true, ReadyTimeout: DefaultProbeReadyTimeout}
	if got := r.Probe.WithDefaults(); got != want {
		t.Errorf("probe %+v, want %+v", got, want)
	}
	if got := r.ReadyWait(EventConfigure); got != DefaultProbeReadyTimeout {
		t.Errorf("a configure waits %s for its check, want %s", got, DefaultProbeReadyTimeout)
	}
	if got := r.ReadyWait(EventAddNodes); got != 0 {
		t.Errorf("an addnodes waits %s for a check; it sets nothing up", got)
	}
	_, err = Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, events: [configure, check], probe: {timeout: 61s}}\n"), "", testScripts)
	if want := "roles[0].probe.timeout: is 1m1s; it must be at most 1m0s, since a check holds one of its host's check slots"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a check of 61 s: %v; want %q", err, want)
	}

	_, err = Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, probe: {every: 500ms, timeout: 10ms, failures: 0, successes: 101, readyTimeout: 1m, often: 2}}\n"), "", testScripts)
	for _, want := range []string{
		"roles[0].probe: is set, but the role's events do not list check, which the probe runs",
		"roles[0].probe.every: is 500ms; it must be at least 1s",
		"roles[0].probe.timeout: is 10ms; it must be at least 100ms",
		"roles[0].probe.failures: is 0; it must be from 1 to 100",
		"roles[0].probe.successes: is 101; it must be from 1 to 100",
		"roles[0].probe.readyTimeout: is set, but readyAfter is not true",
		"roles[0].probe.often: unknown field",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad probe: %v; want %q", err, want)
		}
	}
}

// Check is opt-in: the default subscription never runs it.
func TestCheckIsOptIn(t *testing.T) {
	c, err := Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh}\n"), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Roles[0].Wants(EventCheck) {
		t.Errorf("a role listing no events is checked: %v", c.Roles[0].Events)
	}
}
