package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// Probes: the agent checks each ready member of a role listing check by running its
// startscript with --check every probe.every, as it runs the member's scripts. A launch
// carrying a Probe arms it for when that run succeeds; a launch without one (a teardown, a
// decommission, a role no longer listing check) ends it, as does the member's removal.
// While any run of the member goes on, its checks wait: a member being set up, upgraded
// or restarted is not judged. Only a change of the member's health reaches Temporal: one
// update of its cluster's workflow, which refuses what is stale or changes nothing, so
// that nothing of it reaches the history.

// probesDir holds a file per probed member: the agent's user's alone, since a check's
// environment may hold the cluster's secrets, as a launch's does.
const probesDir = "probes"

// Probe timings the spec does not set.
const (
	// checkGrace is a timed-out check's time between SIGTERM and SIGKILL.
	checkGrace = time.Second
	// reportEvery bounds how often a report the cluster could not take yet (maintenance,
	// Temporal unreachable) is sent again.
	reportEvery   = 10 * time.Second
	reportTimeout = 10 * time.Second
	// reportsAtOnce bounds the reports an agent sends at once.
	reportsAtOnce = 4
)

// probeRecord is what the agent keeps of one member's probe.
type probeRecord struct {
	Cluster      string `json:"cluster"`
	Home         string `json:"home,omitempty"`
	Member       string `json:"member"`
	ConnectionID string `json:"connectionId"`
	// Active is the probe that runs; Next the one the launch under way (NextRun) brings,
	// once it succeeds.
	Active  *Probe `json:"active,omitempty"`
	Next    *Probe `json:"next,omitempty"`
	NextRun string `json:"nextRun,omitempty"`
	// Down says the cluster last took the member for down by its checks.
	Down bool `json:"down,omitempty"`
}

// prober looks after one member's probe.
type prober struct {
	id   string
	file string
	// at is where the member's check runs: its sandbox, its script folder, its records.
	at runPlace

	mu  sync.Mutex
	rec probeRecord
	// passes and fails count the checks in a row; a report the cluster could not take is
	// sent again from retryAfter on.
	passes, fails int
	retryAfter    time.Time
	// recount, set by Recheck under mu, has the checks counted afresh from the next one.
	recount  bool
	stopped  chan struct{}
	stopOnce sync.Once
}

func (p *prober) snapshot() probeRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec
}

// update changes the record and saves it.
func (p *prober) update(change func(*probeRecord)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.rec)
	data, err := json.Marshal(p.rec)
	if err != nil {
		return err
	}
	return atomicfile.Write(p.file, data, 0o600)
}

func (p *prober) stop() { p.stopOnce.Do(func() { close(p.stopped) }) }

// probeID names a member's probe file: a member is its cluster's folder and its name.
func probeID(cluster, home, member string) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + home + "\x00" + member))
	return hex.EncodeToString(sum[:10])
}

// probeLaunched arms the member's probe for when run id succeeds, or ends it for a launch
// without one. It is called before the run starts, so that its end never comes first.
func (a *Agent) probeLaunched(l Launch, id, connID string) {
	pid := probeID(l.Cluster, l.Home, l.Member)
	if l.Probe == nil {
		a.dropProbe(pid, "a run without a probe: "+l.Event)
		return
	}
	at, err := a.place(l, "")
	if err != nil {
		a.log.Warn("Cannot probe a member", zap.String("member", l.Member), zap.Error(err))
		return
	}
	a.mu.Lock()
	p := a.probes[pid]
	if p == nil {
		// Its place is the member's, fixed before its checks start.
		p = &prober{id: pid, file: filepath.Join(a.opts.Dir, probesDir, pid), at: checkPlace(at), stopped: make(chan struct{})}
		p.rec = probeRecord{Cluster: l.Cluster, Home: l.Home, Member: l.Member}
		a.probes[pid] = p
		go a.probe(p)
	}
	a.mu.Unlock()
	err = p.update(func(rec *probeRecord) {
		rec.ConnectionID, rec.Next, rec.NextRun = connID, l.Probe, id
	})
	if err != nil {
		a.log.Warn("Could not save a member's probe; a restarted agent will not check it", zap.String("member", l.Member), zap.Error(err))
	}
}

// checkPlace is where a member's checks run: the place of its runs (made for no run: its
// records are the member's folder of them), with the check's own output and exit files.
func checkPlace(at runPlace) runPlace {
	at.stdout, at.stderr, _ = layout.Output(string(spec.EventCheck))
	at.exit = layout.ExitFile(string(spec.EventCheck))
	return at
}

// runEnded takes the probe a finished run brought: the one to run from now on if the
// run succeeded, none if it did not (the member's former probe, if any, carries on).
func (a *Agent) runEnded(r *run) {
	p := a.armedBy(r)
	if p == nil {
		return
	}
	rec := r.snapshot()
	ok := rec.state() == runExited && rec.Result.Outcome == runner.Exited && rec.Result.ExitCode == 0
	_ = p.update(func(pr *probeRecord) {
		if pr.NextRun != r.id {
			return
		}
		if ok {
			pr.Active, pr.Down = pr.Next, false
		}
		pr.Next, pr.NextRun = nil, ""
	})
	if ok {
		a.log.Debug("Probing member", zap.String("member", rec.Member), zap.Duration("every", p.snapshot().Active.Every))
	}
}

// armedBy is the prober waiting for run r to end, if any.
func (a *Agent) armedBy(r *run) *prober {
	pid := r.snapshot().ProbeID
	a.mu.Lock()
	p := a.probes[pid]
	a.mu.Unlock()
	if p == nil || p.snapshot().NextRun != r.id {
		return nil
	}
	return p
}

// dropProbe ends a member's probe.
func (a *Agent) dropProbe(pid, why string) {
	a.mu.Lock()
	p := a.probes[pid]
	delete(a.probes, pid)
	a.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	_ = os.Remove(p.file)
	a.log.Debug("Stopped probing member", zap.String("member", p.snapshot().Member), zap.String("why", why))
}

// dropProbes ends the probes whose records match.
func (a *Agent) dropProbes(match func(probeRecord) bool, why string) {
	a.mu.Lock()
	var ids []string
	for id, p := range a.probes {
		if match(p.snapshot()) {
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.dropProbe(id, why)
	}
}

// readoptProbes takes over the probes a previous agent kept.
func (a *Agent) readoptProbes() {
	dir := filepath.Join(a.opts.Dir, probesDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		file := filepath.Join(dir, e.Name())
		p := &prober{id: e.Name(), file: file, stopped: make(chan struct{})}
		data, err := os.ReadFile(file)
		if err == nil {
			err = json.Unmarshal(data, &p.rec)
		}
		if err == nil {
			probe := p.rec.Active
			if probe == nil {
				probe = p.rec.Next
			}
			if probe == nil {
				err = errors.New("no probe")
			} else {
				var at runPlace
				at, err = a.place(Launch{Cluster: p.rec.Cluster, Home: p.rec.Home, Member: p.rec.Member, Event: string(spec.EventCheck), Script: probe.Script}, "")
				p.at = checkPlace(at)
			}
		}
		if err != nil {
			a.log.Warn("Dropping a probe that cannot be read", zap.String("file", file), zap.Error(err))
			_ = os.Remove(file)
			continue
		}
		a.probes[p.id] = p
		go a.probe(p)
	}
}

// probe checks the member every probe.every while it is ready, until its probe ends.
func (a *Agent) probe(p *prober) {
	// The first check comes at a random moment of the first period, so that the checks
	// of many members spread over it rather than all starting at once.
	wait := time.Duration(rand.Int64N(int64(spec.MinProbeEvery)))
	if rec := p.snapshot(); rec.Active != nil {
		wait = time.Duration(rand.Int64N(int64(rec.Active.Every)))
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-p.stopped:
			return
		case <-timer.C:
		}
		rec := p.snapshot()
		every := spec.MinProbeEvery
		if rec.Active != nil {
			every = rec.Active.Every
		}
		if _, err := os.Stat(p.at.sandbox); errors.Is(err, os.ErrNotExist) {
			a.dropProbe(p.id, "member removed")
			return
		}
		if rec.Active == nil || rec.Next != nil || a.memberBusy(p.at.records) {
			// Being set up, changed or removed: its checks start afresh after.
			p.passes, p.fails = 0, 0
			timer.Reset(every)
			continue
		}
		if p.takeRecount() {
			p.passes, p.fails = 0, 0
		}
		if c, ran := a.check(p.at, rec.Active); ran {
			a.probeChecked(p, rec, c)
		} else {
			// Not the member's failure: its script or folder is going (a removal under
			// way), or the host cannot start processes; said once in the log.
			a.log.Debug("A member's check could not run", zap.String("member", rec.Member), zap.String("why", c.Result))
		}
		timer.Reset(every)
	}
}

// Rechecker takes a member for down and counts its checks afresh (backend.Rechecker): the
// agent, whose probes they are.
type Rechecker interface {
	Recheck(cluster, home, member string)
}

// Recheck implements Rechecker: the cluster took the member for down from elsewhere, so
// probe.successes passing checks in a row, from the next, report it up. A member this
// agent does not check is left alone.
func (a *Agent) Recheck(cluster, home, member string) {
	a.mu.Lock()
	p := a.probes[probeID(cluster, home, member)]
	a.mu.Unlock()
	if p == nil {
		return
	}
	err := p.update(func(pr *probeRecord) { pr.Down = true })
	p.mu.Lock()
	p.recount = true
	p.mu.Unlock()
	if err != nil {
		a.log.Warn("Could not save a member's probe", zap.String("member", member), zap.Error(err))
	}
	a.log.Info("Rechecking a member taken for down", zap.String("member", member))
}

func (p *prober) takeRecount() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	recount := p.recount
	p.recount = false
	return recount
}

// memberBusy says whether a run of the member (its records folder) is going on.
func (a *Agent) memberBusy(records string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.runs {
		if filepath.Dir(r.dir) == records && !r.snapshot().state().finished() {
			return true
		}
	}
	// A launch of the member under way has armed or dropped its probe before it starts.
	return false
}

// probeChecked counts a check, and reports the member down after probe.failures failures
// in a row, or up after probe.successes successes in a row once it was down.
func (a *Agent) probeChecked(p *prober, rec probeRecord, c spec.ProbeCheck) {
	if c.Passed {
		p.passes, p.fails = p.passes+1, 0
		c.InARow = p.passes
	} else {
		p.passes, p.fails = 0, p.fails+1
		c.InARow = p.fails
	}
	down := rec.Down
	switch {
	case !rec.Down && p.fails >= rec.Active.Failures:
		down = true
	case rec.Down && p.passes >= rec.Active.Successes:
		down = false
	}
	if down == rec.Down || time.Now().Before(p.retryAfter) {
		return
	}
	c.Host = rec.Active.Host
	if !a.reportCheck(rec, down, c) {
		p.retryAfter = time.Now().Add(reportEvery)
		return
	}
	p.retryAfter = time.Time{}
	_ = p.update(func(pr *probeRecord) { pr.Down = down })
}
