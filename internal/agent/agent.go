package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/version"
)

// Options configure an agent.
type Options struct {
	// Dir holds the agent's socket, lock, log, run index and connection settings.
	Dir    string
	Logger *zap.Logger
	// HeartbeatEvery is how often a running script's progress is sent (default 2s).
	HeartbeatEvery time.Duration
	// IdleExit ends the agent once it has had nothing to do for this long; zero never does.
	IdleExit time.Duration
	// Host is the host's backend, which workers call through the socket (nil: the agent
	// takes launches and stops only).
	Host HostBackend
	// Settings is the digest of what the agent was started with (Settings.Digest), which
	// it tells every caller.
	Settings string
	// Socket is where the agent listens (default SocketPath(Dir)).
	Socket string
	// Workers are the users, besides the agent's own, whose processes may call it: the
	// shipped worker's, when the agent runs as root beside it. The socket is made theirs
	// to reach (group SocketGroup, mode 0660) and no one else's.
	Workers     []int
	SocketGroup int
	// EnterCommand starts a script inside a container (Script.Enter); it is followed by
	// --engine, --container, --user, --grace, "--" and the script with its arguments.
	EnterCommand []string
}

// ErrAlreadyRunning means another agent serves the folder.
var ErrAlreadyRunning = errors.New("another agent is already running for this folder")

// Agent supervises startscript runs.
type Agent struct {
	opts    Options
	log     *zap.Logger
	clients *temporalClients
	// ctx ends when the agent stops; scripts keep running, and the next agent adopts them.
	ctx context.Context

	// heartbeats counts the heartbeats sent, for the log's report of the load on Temporal,
	// and checks the members' checks run.
	heartbeats, checks atomic.Int64
	// faults are the test faults FaultEnv sets (none in any deployment).
	faults []fault
	// checkSlots bounds the checks running at once, each cluster to its share;
	// reportSlots bounds the reports of them.
	checkSlots  *checkSlots
	reportSlots chan struct{}

	mu   sync.Mutex
	runs map[string]*run
	// launching holds the runs being started, which a launch of the same run waits for.
	launching map[string]chan struct{}
	// probes are the members the agent checks, by probeID.
	probes   map[string]*prober
	idleFrom time.Time
	stopping bool
}

// Serve runs the agent until ctx ends or it has been idle for IdleExit. It re-adopts the
// runs a previous agent left before it takes new ones.
func Serve(ctx context.Context, opts Options) error {
	if opts.HeartbeatEvery <= 0 {
		opts.HeartbeatEvery = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	opts.Dir = dir
	for _, sub := range []string{indexDir, probesDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	// The agent's folder holds its connections, index and socket: its user's alone, also
	// when an older version made it open.
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	unlock, err := lock(filepath.Join(dir, "agent.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	_ = os.WriteFile(filepath.Join(dir, "agent.pid"), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600)

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	a := &Agent{opts: opts, log: opts.Logger, ctx: ctx, runs: map[string]*run{}, launching: map[string]chan struct{}{}, probes: map[string]*prober{}, idleFrom: time.Now(),
		checkSlots: newCheckSlots(checkSlotsPerCPU * runtime.NumCPU()), reportSlots: make(chan struct{}, reportsAtOnce)}
	a.faults = parseFaults(os.Getenv(FaultEnv), a.log)
	a.clients = newTemporalClients(dir, a.log)
	defer a.clients.close()
	// Probes first: a run adopted finished arms its member's probe as it is delivered.
	a.readoptProbes()
	a.readopt()

	if opts.Host != nil {
		opts.Host.UseLauncher(a)
	}
	socket := opts.Socket
	if socket == "" {
		socket = SocketPath(dir)
	}
	ln, err := listen(socket, opts.SocketGroup)
	if err != nil {
		return err
	}
	defer func() {
		// Gone before the lock is: a client finds no socket rather than a closing one, and
		// the next agent binds afresh.
		ln.Close()
		_ = os.Remove(socket)
	}()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	if opts.IdleExit > 0 {
		go a.exitWhenIdle(stop)
	}
	go a.reportHeartbeats(ctx)
	a.log.Info("Agent serving", zap.Stringer("version", version.Get()), zap.Int("protocol", Protocol), zap.String("dir", dir), zap.Int("adopted", len(a.runs)), zap.Int("probes", len(a.probes)))
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				a.log.Info("Agent stopping; running scripts carry on and are adopted by the next agent")
				return nil
			}
			return err
		}
		go a.serveConn(conn)
	}
}

// callTimeout bounds a call of the host's backend: a removal may sweep a user's
// processes for a while.
const callTimeout = 2 * time.Minute

func (a *Agent) serveConn(conn net.Conn) {
	defer conn.Close()
	uid, ok := peerUID(conn)
	if !ok || (uid != os.Getuid() && !slices.Contains(a.opts.Workers, uid)) {
		// Only the agent's own user and its workers' may call it, whatever the socket's
		// mode and folder allow: a script's user never.
		a.log.Warn("Refused a connection from another user", zap.Int("uid", uid))
		return
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req request
	reply := Reply{Protocol: Protocol, Settings: a.opts.Settings}
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		reply.Error = "bad request: " + err.Error()
	} else if err := a.refuse(req, uid); err != nil {
		a.log.Warn("Refused a request", zap.Int("uid", uid), zap.Error(err))
		replyError(&reply, err)
	} else if req.Call != nil {
		_ = conn.SetDeadline(time.Now().Add(callTimeout))
		ctx, cancel := context.WithTimeout(a.ctx, callTimeout)
		result, err := a.call(ctx, *req.Call)
		cancel()
		if err == nil {
			reply.Result, err = json.Marshal(result)
		}
		if err != nil {
			replyError(&reply, err)
		}
	} else if req.Stop != nil {
		reply.Action = fmt.Sprintf("stopped %d", a.stop(*req.Stop))
	} else if action, err := a.launch(req.Launch); err != nil {
		replyError(&reply, err)
	} else {
		reply.Action = action
	}
	_ = json.NewEncoder(conn).Encode(reply)
}

// refuse says why the agent will not take a request from a caller of that user, if it will
// not. The agent trusts no caller: what runs, as whom, in which engine, and which files it
// reads are its backend's to decide, from its own records and flags. So a worker of
// another user (the shipped worker of a root agent) reaches it only through the backend's
// calls, saying whose namespace it serves and sending its connection's content; a bare
// launch or stop, which names its script's user, engine and container itself, is taken only
// from the agent's own user, who could run anything the agent can.
func (a *Agent) refuse(req request, uid int) error {
	if req.Call == nil {
		if uid != os.Getuid() {
			return &RefusedError{Reason: "the agent runs and stops scripts for another user's worker only through its backend's calls (protocol 4 and later)"}
		}
		return nil
	}
	if req.Call.Worker.Owner == "" && uid != os.Getuid() {
		return &RefusedError{Reason: "a worker's call names no owner (the ID of the namespace it serves): whose folders it may change cannot be told"}
	}
	return req.Call.Worker.Connection.refuseNamedFiles()
}

// status says what the agent is and looks after now: a run counts until its script has ended.
func (a *Agent) status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Status{Version: version.Get().String(), Protocol: Protocol, Probes: len(a.probes)}
	for _, r := range a.runs {
		if !r.snapshot().state().finished() {
			c.Running++
		}
	}
	return c
}

// stop cancels the runs the request names that are still running; it returns how many.
func (a *Agent) stop(s Stop) int {
	// The run to stop may be starting right now, outside the lock: wait for the launches
	// under way (milliseconds each), so that a stop never misses a run just launched.
	a.mu.Lock()
	pending := slices.Collect(maps.Values(a.launching))
	a.mu.Unlock()
	for _, launched := range pending {
		<-launched
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, id := range slices.Sorted(maps.Keys(a.runs)) {
		r := a.runs[id]
		rec := r.snapshot()
		if rec.Key.WorkflowID == s.WorkflowID && rec.Member == s.Member && rec.Event == s.Event && !rec.state().finished() {
			a.log.Info("Stopping a run its workflow cancelled", zap.String("member", rec.Member), zap.String("event", rec.Event))
			r.cancel()
			n++
		}
	}
	return n
}

// exitWhenIdle stops the agent once no run has needed it for IdleExit.
func (a *Agent) exitWhenIdle(stop func()) {
	tick := time.NewTicker(min(a.opts.IdleExit/4+time.Millisecond, 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		idle := len(a.runs) == 0 && len(a.launching) == 0 && len(a.probes) == 0 && time.Since(a.idleFrom) >= a.opts.IdleExit
		if idle {
			a.stopping = true
		}
		a.mu.Unlock()
		if idle {
			a.log.Info("Agent idle; exiting", zap.Duration("idleFor", a.opts.IdleExit))
			stop()
			return
		}
	}
}

// forget drops a run that needs nothing more from the agent.
func (a *Agent) forget(r *run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[r.id] != r {
		return // replaced by a relaunch, which owns the index entry now
	}
	delete(a.runs, r.id)
	if len(a.runs) == 0 {
		a.idleFrom = time.Now()
	}
	_ = os.Remove(filepath.Join(a.opts.Dir, indexDir, r.id))
}

// checkSlotsPerCPU is how many checks run at once per CPU: a check is mostly process
// starts, and a few more than the CPUs keep them busy while others wait on I/O.
const checkSlotsPerCPU = 4

// heartbeatReportEvery is how often the log says how many heartbeats went to Temporal.
const heartbeatReportEvery = time.Minute

// reportHeartbeats logs, each minute there were any, the heartbeats sent and the runs
// there are: the load the agent puts on Temporal.
func (a *Agent) reportHeartbeats(ctx context.Context) {
	tick := time.NewTicker(heartbeatReportEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if sent := a.heartbeats.Swap(0); sent > 0 {
			a.mu.Lock()
			runs := len(a.runs)
			a.mu.Unlock()
			a.log.Info("Heartbeats sent", zap.Int64("lastMinute", sent), zap.Float64("perSecond", float64(sent)/heartbeatReportEvery.Seconds()), zap.Int("runs", runs))
		}
		if checked := a.checks.Swap(0); checked > 0 {
			a.mu.Lock()
			probes := len(a.probes)
			a.mu.Unlock()
			a.log.Info("Members checked", zap.Int64("lastMinute", checked), zap.Float64("perSecond", float64(checked)/heartbeatReportEvery.Seconds()), zap.Int("probes", probes))
		}
	}
}
