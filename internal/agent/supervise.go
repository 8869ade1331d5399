package agent

import (
	"context"
	"errors"
	"os"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// How often a run is checked for its end. A run this agent started tells it when its
// wrapper exits, so polling is only a backstop; an adopted run is polled, which bounds how
// late the workflow learns that its script exited.
const (
	pollOwnEvery     = time.Second
	pollAdoptedEvery = 50 * time.Millisecond
)

// supervise watches a running script until it ends, times out or is cancelled, then
// delivers its result. If the agent stops meanwhile, the script carries on.
func (a *Agent) supervise(r *run) {
	ctx, stopHeartbeats := context.WithCancel(a.ctx)
	defer stopHeartbeats()
	go a.heartbeat(ctx, r)
	every := pollAdoptedEvery
	if r.exited != nil {
		every = pollOwnEvery
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	rec := r.snapshot()
	deadline := time.NewTimer(time.Until(rec.Started.Add(rec.Timeout)))
	defer deadline.Stop()
	h := rec.Handle
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-r.canceled:
			h.Stop(rec.Grace)
			a.finish(r, runner.Canceled)
			return
		case <-deadline.C:
			h.Stop(rec.Grace)
			a.finish(r, runner.TimedOut)
			return
		case <-poll.C:
		case <-r.exited:
			r.exited = nil // closed for good; keep checking by polling
		}
		if _, ok := h.ExitCode(); ok {
			a.finish(r, runner.Exited)
			return
		}
		if !h.Running() {
			if _, ok := h.ExitCode(); ok { // it ended between the two looks
				a.finish(r, runner.Exited)
				return
			}
			if _, err := os.Stat(r.dir); err != nil {
				a.log.Info("Member removed while its script ran; dropping the run", zap.String("member", rec.Member))
				a.forget(r)
				return
			}
			a.log.Warn("Script vanished without an exit status; reporting it lost so it runs again",
				zap.String("member", rec.Member), zap.String("event", rec.Event))
			r.update(func(rec *record) { rec.Lost = true })
			a.fault(FaultLost, rec.Member, rec.Event)
			go a.deliver(r)
			return
		}
	}
}

// finish stores how the run ended, then delivers it.
func (a *Agent) finish(r *run, outcome runner.Outcome) {
	rec := r.snapshot()
	a.fault(FaultExited, rec.Member, rec.Event)
	code, ok := rec.Handle.ExitCode()
	if !ok {
		code = 128 + 9 // killed with the rest of its group before it could say
	}
	res := runner.Result{Outcome: outcome, ExitCode: code, Duration: time.Since(rec.Started)}
	res.StdoutTail, res.StderrTail = rec.Handle.Tails()
	if p := a.armedBy(r); p != nil && outcome == runner.Exited && code == 0 && spec.Event(rec.Event).SetsUp() {
		if probe := p.snapshot().Next; probe != nil && probe.ReadyAfter {
			// Done only once the member answers its check; a restarted agent, finding
			// the exit status and no result, waits again.
			notReady, stop := a.awaitReady(r, p.at, probe)
			switch {
			case stop && a.ctx.Err() != nil:
				return
			case stop:
				res.Outcome = runner.Canceled
			case notReady != "":
				res.Outcome, res.Detail = runner.NotReady, notReady
			}
			res.Duration = time.Since(rec.Started)
		}
	}
	r.update(func(rec *record) { rec.Result = &res })
	a.fault(FaultFinished, rec.Member, rec.Event)
	a.deliver(r)
}

// heartbeat reports progress until ctx ends. A heartbeat answered with a cancellation
// cancels the run.
//
// Every heartbeat is a write on the server, which adds up: 10,000 scripts reporting every
// 2 s would be 5,000 writes a second. So a script's new last line is reported within
// HeartbeatEvery, as the Web UI shows it, but a quiet script only once every third of its
// heartbeat timeout, which keeps the activity alive. A cancel reaches a quiet script at its
// next report, so within that third (10 s by default).
func (a *Agent) heartbeat(ctx context.Context, r *run) {
	tick := time.NewTicker(a.opts.HeartbeatEvery)
	defer tick.Stop()
	sentLine, sentAt := "", time.Now()
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.heartbeatNow:
			force = true
		}
		rec := r.snapshot()
		for _, f := range []string{rec.Handle.StdoutFile, rec.Handle.StderrFile} {
			if _, err := runner.RotateLog(rec.Handle.Sandbox, f, rec.Handle.KeptOutput()); err != nil {
				a.log.Warn("Could not rotate a script's log", zap.String("file", f), zap.Error(err))
			}
		}
		line := rec.Handle.LastLine()
		if !force && line == sentLine && time.Since(sentAt) < a.keepAliveEvery(rec) {
			continue
		}
		sentLine, sentAt = line, time.Now()
		a.heartbeats.Add(1)
		c, err := a.clients.get(rec.ConnectionID)
		if err == nil {
			callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = c.RecordActivityHeartbeat(callCtx, rec.TaskToken, Progress{
				Member: rec.Member, Event: rec.Event,
				Elapsed:  time.Since(rec.Started).Round(100 * time.Millisecond).String(),
				LastLine: line,
			})
			cancel()
		}
		var notFound *serviceerror.NotFound
		switch {
		case temporal.IsCanceledError(err):
			r.cancel()
			return
		case errors.As(err, &notFound):
			// This attempt is over (timed out, or its workflow ended). A retry brings a fresh
			// token; until then the script carries on.
		case err != nil && ctx.Err() == nil:
			a.log.Debug("Heartbeat not delivered", zap.String("member", rec.Member), zap.Error(err))
		}
	}
}

// keepAliveEvery is how often a run whose output has not changed is reported.
func (a *Agent) keepAliveEvery(rec record) time.Duration {
	return max(a.opts.HeartbeatEvery, rec.HeartbeatTimeout/3)
}
