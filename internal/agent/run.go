package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// indexDir lists, by run ID, the record folders of runs that still need the agent: running,
// or finished with a result not yet delivered. A restarted agent starts from it.
const indexDir = "runs"

var errStopping = errors.New("agent is stopping; retry with the next one")

// run is one run the agent looks after.
type run struct {
	id, dir string
	log     *zap.Logger

	mu  sync.Mutex
	rec *record
	// canceled is closed when a heartbeat answers that the activity was cancelled.
	canceled   chan struct{}
	cancelOnce sync.Once
	// retokened wakes a waiting delivery, and heartbeatNow the heartbeat loop, when a
	// relaunch brings a fresh task token: the new attempt's heartbeat clock is running.
	retokened, heartbeatNow chan struct{}
	// dropped is closed when a relaunch replaces this run, ending its delivery.
	dropped chan struct{}
	// exited is closed when the script's wrapper exits, for runs this agent started; runs
	// adopted from a previous agent are polled instead.
	exited <-chan struct{}
}

func (a *Agent) newRun(id, dir string, rec *record) *run {
	return &run{id: id, dir: dir, log: a.log, rec: rec, canceled: make(chan struct{}), dropped: make(chan struct{}),
		retokened: make(chan struct{}, 1), heartbeatNow: make(chan struct{}, 1)}
}

func (r *run) snapshot() record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.rec
}

func (r *run) update(change func(*record)) {
	if err := r.save(change); err != nil && !errors.Is(err, os.ErrNotExist) {
		// The member may have been removed under us; the run is then moot.
		r.log.Warn("Could not save run record", zap.String("dir", r.dir), zap.Error(err))
	}
}

// save changes the record and saves it.
func (r *run) save(change func(*record)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	change(r.rec)
	return r.rec.save(r.dir)
}

func (r *run) cancel() { r.cancelOnce.Do(func() { close(r.canceled) }) }

// launch starts a run, or attaches a relaunch to the run it repeats. Only a run that is
// truly lost (its process ended without an exit status) is started again.
func (a *Agent) launch(l Launch) (string, error) {
	if err := l.check(); err != nil {
		return "", err
	}
	id := l.Key.ID()
	at, err := a.place(l, id)
	if err != nil {
		return "", err // refused before anything, its connection included, is kept
	}
	connID, err := a.clients.save(l.Connection)
	if err != nil {
		return "", err
	}
	retoken := func(rec *record) {
		rec.TaskToken, rec.ConnectionID = l.TaskToken, connID
	}
	for {
		a.mu.Lock()
		if a.stopping {
			a.mu.Unlock()
			return "", errStopping
		}
		if pending := a.launching[id]; pending != nil {
			// A launch of the same run is under way: wait for it, then attach to its run.
			a.mu.Unlock()
			<-pending
			continue
		}
		if action, ok := a.attach(id, retoken); ok {
			a.mu.Unlock()
			return action, nil
		}
		// Reserve the run, and start it without the lock: a wide role's launches arrive
		// together, and each spawn takes milliseconds that others need not wait for.
		done := make(chan struct{})
		a.launching[id] = done
		a.mu.Unlock()
		a.probeLaunched(l, id, connID)
		action, err := a.start(l, id, at, retoken)
		a.mu.Lock()
		delete(a.launching, id)
		close(done)
		a.mu.Unlock()
		if action == ActionStarted {
			a.fault(FaultRecorded, l.Member, l.Event)
		}
		return action, err
	}
}

// attach joins a relaunch to the run it repeats, if the agent looks after one that is not
// lost; the caller holds a.mu.
func (a *Agent) attach(id string, retoken func(*record)) (string, bool) {
	r := a.runs[id]
	if r == nil {
		return "", false
	}
	if r.snapshot().state() == runLost {
		// Still reporting the loss; the relaunch runs the script again instead.
		delete(a.runs, id)
		close(r.dropped)
		return "", false
	}
	r.update(retoken)
	for _, wake := range []chan struct{}{r.retokened, r.heartbeatNow} {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if r.snapshot().state().finished() {
		return ActionDelivering, true
	}
	return ActionAttached, true
}

// start takes over a run a previous agent left on disk, or starts the script afresh. The
// caller has reserved the run's ID in a.launching.
func (a *Agent) start(l Launch, id string, at runPlace, retoken func(*record)) (string, error) {
	dir := at.records
	if rec, err := loadRecord(dir); err == nil && rec.state() != runLost {
		if rec.state() == runExited {
			r := a.track(id, dir, rec, retoken)
			go a.deliver(r)
			return ActionDelivering, nil
		}
		if _, exited := rec.Handle.ExitCode(); exited || rec.Handle.Running() {
			r := a.track(id, dir, rec, retoken)
			go a.supervise(r)
			return ActionAttached, nil
		}
	}
	rec := &record{
		Key: l.Key, Member: l.Member, Event: l.Event, Timeout: l.Timeout, Grace: l.Grace, HeartbeatTimeout: l.HeartbeatTimeout,
		Started: time.Now(), ProbeID: probeID(l.Cluster, l.Home, l.Member),
	}
	cmd, err := a.command(l.Script, at, l.Grace)
	if err != nil {
		return "", err
	}
	// The script is held at its gate until its run is recorded: an agent that dies in
	// between leaves no script running that a relaunch would not find (runner.SpawnHeld).
	held, err := runner.SpawnHeld(cmd)
	if err != nil {
		return "", err
	}
	rec.Handle = held.Handle
	a.fault(FaultSpawned, l.Member, l.Event)
	r := a.newRun(id, dir, rec)
	r.exited = held.Exited
	if err := a.record(r, retoken); err != nil {
		held.Abandon()
		a.drop(r)
		return "", fmt.Errorf("record the run of %s on %s, so nothing ran: %w", l.Event, l.Member, err)
	}
	if err := held.Release(); err != nil {
		// Its wrapper is gone: supervise finds the run lost, and a relaunch runs it.
		a.log.Warn("Could not release a recorded run", zap.String("member", l.Member), zap.String("event", l.Event), zap.Error(err))
	}
	a.log.Debug("Started script", zap.String("member", l.Member), zap.String("event", l.Event), zap.Int("pid", rec.Handle.PID))
	go a.supervise(r)
	return ActionStarted, nil
}

// command is how to start the script at its place: its content checked against its hash,
// as its user, or entering its member's container.
func (a *Agent) command(s Script, at runPlace, grace time.Duration) (runner.Spec, error) {
	path, args, err := verify(at.script, s.SHA256, s.Args)
	if err != nil {
		return runner.Spec{}, err
	}
	user := s.User
	if s.Enter != nil {
		if len(a.opts.EnterCommand) == 0 {
			return runner.Spec{}, &RefusedError{Reason: "this agent cannot run scripts in containers"}
		}
		// The script runs as the container's user; what enters it talks to the engine.
		args = append(append(slices.Clone(a.opts.EnterCommand[1:]), "--engine", s.Enter.Engine, "--container", s.Enter.Container,
			"--user", s.Enter.User, "--grace", grace.String(), "--"), append([]string{path}, args...)...)
		path, user = a.opts.EnterCommand[0], nil
	}
	return runner.Spec{
		Path: path, Args: args, Dir: at.sandbox, Env: s.Env, Sandbox: at.sandbox,
		StdoutFile: at.stdout, StderrFile: at.stderr, ExitFile: at.exit, User: user, Cgroup: at.cgroup, Limits: s.Limits, Resources: s.Resources,
	}, nil
}

// track looks after a run found on disk from now on.
func (a *Agent) track(id, dir string, rec *record, change func(*record)) *run {
	r := a.newRun(id, dir, rec)
	if err := a.record(r, change); err != nil {
		a.log.Warn("Could not save a run's record", zap.String("dir", dir), zap.Error(err))
	}
	return r
}

// record saves the run and its index entry, and adds it to the runs the agent looks after.
// An error says the run's record could not be saved: a restarted agent could not find it.
func (a *Agent) record(r *run, change func(*record)) error {
	err := r.save(change)
	if err := atomicfile.Write(filepath.Join(a.opts.Dir, indexDir, r.id), []byte(r.dir), 0o644); err != nil {
		a.log.Warn("Could not index run; a restarted agent will not adopt it", zap.String("dir", r.dir), zap.Error(err))
	}
	a.mu.Lock()
	a.runs[r.id] = r
	a.mu.Unlock()
	return err
}

// drop undoes record for a run that never started.
func (a *Agent) drop(r *run) {
	a.forget(r)
	_ = os.Remove(filepath.Join(r.dir, recordFile))
}

// readopt takes over the runs a previous agent left: it supervises those still running and
// delivers the results not yet delivered.
func (a *Agent) readopt() {
	entries, _ := os.ReadDir(filepath.Join(a.opts.Dir, indexDir))
	for _, e := range entries {
		entry := filepath.Join(a.opts.Dir, indexDir, e.Name())
		dir, err := os.ReadFile(entry)
		if err != nil {
			continue
		}
		rec, err := loadRecord(string(dir))
		if err != nil {
			_ = os.Remove(entry) // the member, and its records, are gone
			continue
		}
		r := a.newRun(e.Name(), string(dir), rec)
		a.runs[r.id] = r
		if rec.state().finished() {
			go a.deliver(r)
		} else {
			go a.supervise(r)
		}
		a.log.Info("Adopted run", zap.String("member", rec.Member), zap.String("event", rec.Event),
			zap.Bool("finished", rec.state().finished()))
	}
}

func (l Launch) check() error {
	switch {
	case l.Protocol != Protocol:
		return &RefusedError{Reason: fmt.Sprintf("a launch of protocol %d; this agent speaks %d", l.Protocol, Protocol)}
	case l.Key.WorkflowID == "" || l.Key.ActivityID == "":
		return fmt.Errorf("launch needs a workflow ID and an activity ID")
	case len(l.TaskToken) == 0:
		return fmt.Errorf("launch needs a task token")
	case l.Timeout <= 0:
		return fmt.Errorf("launch needs a timeout")
	}
	return nil
}

// runPlace is where a run lives, all of it derived from the launch's names: its member's
// sandbox, the script it runs, its record folder, and its output and exit files within
// the sandbox.
type runPlace struct {
	sandbox, script, records string
	stdout, stderr, exit     string
	// cgroup holds the member's processes, where the agent can make cgroups.
	cgroup string
	// cluster is the key of the member's cluster (layout.Cluster.Key).
	cluster string
}

func (a *Agent) place(l Launch, id string) (runPlace, error) {
	root := layout.Root(filepath.Dir(a.opts.Dir))
	cluster := layout.Cluster{Name: l.Cluster, Home: l.Home}
	var p runPlace
	var err error
	if p.sandbox, err = root.Sandbox(cluster, l.Member); err != nil {
		return p, &RefusedError{Reason: err.Error()}
	}
	if p.script, err = root.Script(cluster, l.Script.SHA256); err != nil {
		return p, &RefusedError{Reason: err.Error()}
	}
	records, err := root.Records(cluster, l.Member)
	if err != nil {
		return p, &RefusedError{Reason: err.Error()}
	}
	if p.stdout, p.stderr, err = layout.Output(l.Event); err != nil {
		return p, &RefusedError{Reason: err.Error()}
	}
	p.records, p.exit = filepath.Join(records, id), layout.ExitFile(id)
	p.cgroup, p.cluster = runner.MemberCgroup(string(root), cluster.Key(), l.Member), cluster.Key()
	return p, nil
}

// verify checks that the startscript is the content its hash names, right before it runs
// (a script changed on the host after the workflow chose it is not the script asked for),
// and returns how to run it: directly with a #! line, by /bin/sh without.
func verify(script, sum string, args []string) (string, []string, error) {
	f, err := os.Open(script)
	if err != nil {
		return "", nil, &RefusedError{Reason: fmt.Sprintf("startscript %s: %v", script, err)}
	}
	defer f.Close()
	h := sha256.New()
	head := make([]byte, 2)
	n, _ := io.ReadFull(f, head)
	h.Write(head[:n])
	if _, err := io.Copy(h, f); err != nil {
		return "", nil, &RefusedError{Reason: fmt.Sprintf("startscript %s: %v", script, err)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", nil, &RefusedError{Reason: fmt.Sprintf("startscript %s was changed on this host: its SHA-256 is %s, not %s as the cluster's spec says; nothing ran", script, got, sum)}
	}
	if string(head[:n]) == "#!" {
		return script, args, nil
	}
	return "/bin/sh", append([]string{script}, args...), nil
}
