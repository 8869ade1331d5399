package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// One check of a member, what it tells the member's cluster, and the wait of a ready-after
// run (probe.go has the probes' lives).

// check runs the member's check once, killing it at probe.timeout (at most
// spec.MaxProbeTimeout, whatever a caller asks). It waits for one of the agent's check slots
// first, its cluster's share of them (checkSlots), for at most slotWait: a thousand members
// checked every second would otherwise start a thousand processes at once, and the host
// would spend its time switching. A check that could not even start says why, and is not
// one (ran is false).
func (a *Agent) check(at runPlace, probe *Probe) (c spec.ProbeCheck, ran bool) {
	wait := slotWait(probe.Every)
	release, ok := a.checkSlots.acquire(a.ctx, at.cluster, wait)
	switch {
	case !ok && a.ctx.Err() != nil:
		return spec.ProbeCheck{At: time.Now(), Result: "not run: the agent is stopping"}, false
	case !ok:
		return spec.ProbeCheck{At: time.Now(), Result: fmt.Sprintf("not run: no check slot of its cluster's share came free within %s", wait)}, false
	}
	defer release()
	timeout := min(probe.Timeout, spec.MaxProbeTimeout)
	c = spec.ProbeCheck{At: time.Now()}
	notRun := func(err error) (spec.ProbeCheck, bool) {
		c.Result = "could not run: " + err.Error()
		return c, false
	}
	cmd, err := a.command(probe.Script, at, checkGrace)
	if err != nil {
		return notRun(err)
	}
	h, exited, err := runner.Spawn(cmd) // fails when the sandbox is gone
	if err != nil {
		return notRun(err)
	}
	a.checks.Add(1)
	timedOut := false
	deadline := time.NewTimer(timeout)
	select {
	case <-exited:
	case <-deadline.C:
		timedOut = true
	case <-a.ctx.Done():
		timedOut = true
	}
	deadline.Stop()
	// What the check left running, or all of it once timed out. Its output files are
	// rotated as the next check opens them.
	h.Stop(checkGrace)
	code, exitedWithStatus := h.ExitCode()
	switch {
	case timedOut: // its status, if any, is that of the kill
		c.Result = fmt.Sprintf("timed out after %s", timeout)
	case !exitedWithStatus:
		c.Result = "ended without an exit status"
	case code != 0:
		c.Result = fmt.Sprintf("exited with status %d", code)
	default:
		c.Passed, c.Result = true, "passed"
		return c, true
	}
	stdout, stderr := h.Tails()
	c.Output = checkOutput(stdout, stderr)
	return c, true
}

// slotWait bounds a check's wait for a slot: ten of the probe's periods, within 10 s and
// spec.MaxProbeTimeout. Waiters are served in turn, so the checks of a thousand members due
// every second all run, one round after another, however long a round takes; only a wait
// past this (slots held by hung checks) gives up, and the next check waits again.
func slotWait(every time.Duration) time.Duration {
	return min(max(10*every, 10*time.Second), spec.MaxProbeTimeout)
}

// checkOutput is the end of a failed check's output, stderr first, within MaxCheckOutput.
func checkOutput(stdout, stderr string) string {
	text := strings.TrimSpace(strings.TrimSpace(stderr) + "\n" + strings.TrimSpace(stdout))
	if len(text) > spec.MaxCheckOutput {
		text = strings.ToValidUTF8(text[len(text)-spec.MaxCheckOutput:], "")
	}
	return text
}

// reportCheck tells the member's cluster that its checks found it down or up again; it
// says whether the cluster took the report, or refused it for good (stale, or changing
// nothing). A report refused for now (maintenance), or that did not get through, is sent
// again later; a cluster that is gone ends the probe.
func (a *Agent) reportCheck(rec probeRecord, down bool, c spec.ProbeCheck) bool {
	c.Home = rec.Home
	ev := workflows.MemberEvent{Member: rec.Member, Event: plan.HealthUp, Source: workflows.ProbeSource, At: c.At, Check: &c,
		Reason: fmt.Sprintf("check passed %d times in a row", c.InARow)}
	if down {
		ev.Event, ev.Reason = plan.HealthDown, fmt.Sprintf("check failed %d times in a row: %s", c.InARow, c.Result)
		if line := lastLine(c.Output); line != "" {
			ev.Reason += ": " + line
		}
		ev.Reason = spec.Clip(ev.Reason, spec.MaxTextBytes)
	}
	log := a.log.With(zap.String("member", rec.Member), zap.String("event", string(ev.Event)))
	cl, err := a.clients.get(rec.ConnectionID)
	if err != nil {
		log.Warn("Could not report a member's check", zap.Error(err))
		return false
	}
	// A few reports at a time: many members failing together (a host's disk full, say)
	// must not flood their cluster's workflow with updates it can take only one by one.
	select {
	case a.reportSlots <- struct{}{}:
		defer func() { <-a.reportSlots }()
	case <-a.ctx.Done():
		return false
	}
	ctx, cancel := context.WithTimeout(a.ctx, reportTimeout)
	defer cancel()
	handle, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.ClusterWorkflowID(rec.Cluster), UpdateName: workflows.MemberEventUpdate,
		Args: []any{ev}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var result workflows.MemberEventResult
	if err == nil {
		err = handle.Get(ctx, &result)
	}
	var appErr *temporal.ApplicationError
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		log.Info("Reported a member's check", zap.String("from", string(result.From)), zap.String("to", string(result.To)), zap.String("reason", ev.Reason))
		return true
	case errors.As(err, &appErr) && appErr.Type() == string(apperr.Maintenance):
		log.Debug("Cluster in maintenance; the check's report waits", zap.Error(err))
		return false
	case errors.As(err, &appErr):
		log.Info("Cluster refused a member's check; taking it as said", zap.Error(err))
		return true
	case errors.As(err, &notFound):
		a.dropProbe(probeID(rec.Cluster, rec.Home, rec.Member), "its cluster's workflow is gone")
		return false
	}
	log.Warn("Could not report a member's check; trying again", zap.Duration("in", reportEvery), zap.Error(err))
	return false
}

// lastLine is the last non-empty line of a text.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// awaitReady runs the member's check every probe.every until one passes, for at most
// probe.readyTimeout after the run began waiting: "" once one passed, else why none did.
// It gives up (stop) when the run is cancelled or the agent stops.
func (a *Agent) awaitReady(r *run, at runPlace, probe *Probe) (notReady string, stop bool) {
	deadline := time.Now().Add(probe.ReadyTimeout)
	var last spec.ProbeCheck
	for {
		if c, ran := a.check(at, probe); ran || last.Result == "" {
			last = c
		}
		if last.Passed {
			return "", false
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		select {
		case <-a.ctx.Done():
			return "", true
		case <-r.canceled:
			return "", true
		case <-time.After(min(probe.Every, left)):
		}
	}
	why := fmt.Sprintf("its check did not pass within readyTimeout %s: %s", probe.ReadyTimeout, last.Result)
	if line := lastLine(last.Output); line != "" {
		why += ": " + line
	}
	return why, false
}
