package spec

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Probe defaults and bounds.
const (
	DefaultProbeEvery        = 10 * time.Second
	DefaultProbeTimeout      = 5 * time.Second
	DefaultProbeFailures     = 3
	DefaultProbeSuccesses    = 1
	DefaultProbeReadyTimeout = 5 * time.Minute
	// MinProbeEvery keeps a host's checks from spinning; MinProbeTimeout is the least a
	// process start needs.
	MinProbeEvery   = time.Second
	MinProbeTimeout = 100 * time.Millisecond
	// MaxProbeTimeout bounds a check: it holds one of its host's check slots, shared by
	// every cluster there, while it runs.
	MaxProbeTimeout = time.Minute
	// MaxProbeCount bounds failures and successes: past it a probe watches nothing.
	MaxProbeCount = 100
	// MaxCheckOutput is how much of a failed check's output is kept with its report.
	MaxCheckOutput = 512
)

// Probe is how a role's members are checked by their own host: every Every, the host's
// agent runs the role's startscript with --check on each ready member, as the member's
// user, and kills it after Timeout. Failures failed checks in a row take the member down,
// Successes passing checks in a row bring a down member up, through the same health state
// machine as a reported down or up. Only those changes reach the cluster's workflow.
type Probe struct {
	Every     time.Duration `json:"every,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`
	Failures  int           `json:"failures,omitempty"`
	Successes int           `json:"successes,omitempty"`
	// ReadyAfter makes a configure (and a start, an upgrade or a restart) count as done
	// only once a check passes, within ReadyTimeout: how a role whose configure starts a
	// daemon says that the daemon answers.
	ReadyAfter   bool          `json:"readyAfter,omitempty"`
	ReadyTimeout time.Duration `json:"readyTimeout,omitempty"`
}

// WithDefaults fills in every field left out.
func (p Probe) WithDefaults() Probe {
	if p.Every == 0 {
		p.Every = DefaultProbeEvery
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultProbeTimeout
	}
	if p.Failures == 0 {
		p.Failures = DefaultProbeFailures
	}
	if p.Successes == 0 {
		p.Successes = DefaultProbeSuccesses
	}
	if p.ReadyTimeout == 0 {
		p.ReadyTimeout = DefaultProbeReadyTimeout
	}
	return p
}

// ReadyWait is how much longer than its script a run of the event may take because it waits
// for a passing check (Probe.ReadyAfter); zero for a role that does not.
func (r Role) ReadyWait(e Event) time.Duration {
	if !r.Wants(EventCheck) || !r.Probe.ReadyAfter || !e.SetsUp() {
		return 0
	}
	return r.Probe.WithDefaults().ReadyTimeout
}

// SetsUp says whether a run of the event leaves a member's services running, as a
// configure does: a ready-after probe waits for its check to pass.
func (e Event) SetsUp() bool {
	return e == EventConfigure || e == EventStart || e == EventUpgrade || e == EventRestart
}

// ProbeCheck is one check of a member as its host reported it: the check that changed the
// member's health, and how many in a row agreed.
type ProbeCheck struct {
	// Host is the host that ran it (empty in single-host mode): a report from a host that
	// no longer holds the member is stale.
	Host string `json:"host,omitempty"`
	// Home is the home of the cluster folder the checked member is in (empty from agents of
	// before it): a report from a folder of an earlier cluster of the name is not this one's.
	Home   string    `json:"home,omitempty"`
	At     time.Time `json:"at"`
	Passed bool      `json:"passed"`
	// Result says how it ended: "passed", "exited with status N", "timed out after D".
	Result string `json:"result"`
	// Output is the end of a failed check's output, at most MaxCheckOutput bytes.
	Output string `json:"output,omitempty"`
	// InARow counts the checks in a row that ended as this one did.
	InARow int `json:"inARow"`
}

type draftProbe struct {
	Every, Timeout, ReadyTimeout *time.Duration
	Failures, Successes          *int
	ReadyAfter                   *bool
}

func (w walker) probe(path string, n *yaml.Node) *draftProbe {
	p := &draftProbe{}
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"every":        func(p2 string, n *yaml.Node) { p.Every = w.duration(p2, n) },
		"timeout":      func(p2 string, n *yaml.Node) { p.Timeout = w.duration(p2, n) },
		"failures":     func(p2 string, n *yaml.Node) { p.Failures = w.integer(p2, n) },
		"successes":    func(p2 string, n *yaml.Node) { p.Successes = w.integer(p2, n) },
		"readyAfter":   func(p2 string, n *yaml.Node) { p.ReadyAfter = w.boolean(p2, n) },
		"readyTimeout": func(p2 string, n *yaml.Node) { p.ReadyTimeout = w.duration(p2, n) },
	})
	return p
}

// checkProbe reads a role's probe: it needs the check event, and each field its bounds.
func checkProbe(path string, d *draftProbe, r Role, ps *problems) Probe {
	var p Probe
	if d == nil {
		return p
	}
	if !r.Wants(EventCheck) {
		ps.add(path, "is set, but the role's events do not list check, which the probe runs")
	}
	durations := []struct {
		name        string
		value       *time.Duration
		least, most time.Duration
		to          *time.Duration
	}{
		{"every", d.Every, MinProbeEvery, 0, &p.Every},
		{"timeout", d.Timeout, MinProbeTimeout, MaxProbeTimeout, &p.Timeout},
		{"readyTimeout", d.ReadyTimeout, MinProbeEvery, 0, &p.ReadyTimeout},
	}
	for _, f := range durations {
		if f.value == nil {
			continue
		}
		if *f.value < f.least {
			ps.add(path+"."+f.name, "is %s; it must be at least %s", *f.value, f.least)
			continue
		}
		if f.most > 0 && *f.value > f.most {
			ps.add(path+"."+f.name, "is %s; it must be at most %s, since a check holds one of its host's check slots, which every cluster there shares", *f.value, f.most)
			continue
		}
		*f.to = *f.value
	}
	for _, f := range []struct {
		name  string
		value *int
		to    *int
	}{{"failures", d.Failures, &p.Failures}, {"successes", d.Successes, &p.Successes}} {
		if f.value == nil {
			continue
		}
		if *f.value < 1 || *f.value > MaxProbeCount {
			ps.add(path+"."+f.name, "is %d; it must be from 1 to %d", *f.value, MaxProbeCount)
			continue
		}
		*f.to = *f.value
	}
	if d.ReadyAfter != nil {
		p.ReadyAfter = *d.ReadyAfter
	}
	if d.ReadyTimeout != nil && !p.ReadyAfter {
		ps.add(path+".readyTimeout", "is set, but readyAfter is not true: only a ready-after probe waits")
	}
	return p
}
