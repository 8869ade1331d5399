package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/runner"
)

// deliver completes the run's activity, retrying with backoff while Temporal cannot be
// reached. It stops once Temporal takes the result or the activity no longer exists; the
// result stays on disk for a relaunch either way.
func (a *Agent) deliver(r *run) {
	a.runEnded(r)
	backoff := 100 * time.Millisecond
	for {
		rec := r.snapshot()
		err := a.complete(rec)
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
			a.fault(FaultDelivered, rec.Member, rec.Event)
			a.forget(r)
			return
		case errors.As(err, &notFound) && !bytes.Equal(r.snapshot().TaskToken, rec.TaskToken):
			// A relaunch brought the next attempt's token while this one was refused: the
			// result goes to that attempt now, or no one delivers it.
			continue
		case errors.As(err, &notFound):
			a.log.Info("Activity no longer exists; keeping the result for a relaunch",
				zap.String("member", rec.Member), zap.String("event", rec.Event), zap.Error(err))
			// The same moment as a delivery: an agent that died while Temporal took the
			// result finds it taken here.
			a.fault(FaultDelivered, rec.Member, rec.Event)
			a.forget(r)
			return
		}
		a.log.Warn("Could not deliver result; retrying", zap.String("member", rec.Member),
			zap.String("event", rec.Event), zap.Duration("in", backoff), zap.Error(err))
		select {
		case <-a.ctx.Done():
			return // the index keeps it for the next agent
		case <-r.dropped:
			return
		case <-r.retokened:
			backoff = 100 * time.Millisecond
		case <-time.After(backoff):
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

func (a *Agent) complete(rec record) error {
	c, err := a.clients.get(rec.ConnectionID)
	if err != nil {
		return err
	}
	result, failure := completion(rec)
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	if failure != nil {
		return c.CompleteActivity(ctx, rec.TaskToken, nil, failure)
	}
	return c.CompleteActivity(ctx, rec.TaskToken, result, nil)
}

// completion turns a finished run into the activity's result or failure.
func completion(rec record) (*runner.Result, error) {
	if rec.state() == runLost {
		return nil, temporal.NewApplicationError(
			fmt.Sprintf("%s of %s was lost: its process ended without an exit status", rec.Event, rec.Member), ErrScriptLost)
	}
	if err := ResultError(rec.Event, rec.Timeout, *rec.Result); err != nil {
		return nil, err
	}
	return rec.Result, nil
}

// ResultError is the error an activity fails with for a run that did not succeed, or nil.
// Failures carry the result, tails included, as plain JSON details readable in the Web UI.
func ResultError(event string, timeout time.Duration, res runner.Result) error {
	switch {
	case res.Outcome == runner.Canceled:
		return temporal.NewCanceledError(res)
	case res.Outcome == runner.TimedOut:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s timed out after %s%s", event, timeout, lastLineOf(res)), ErrScriptTimedOut, nil, res)
	case res.Outcome == runner.NotReady:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s exited with status 0, but %s", event, res.Detail), ErrScriptFailed, nil, res)
	case res.ExitCode != 0:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s exited with status %d%s", event, res.ExitCode, lastLineOf(res)), ErrScriptFailed, nil, res)
	}
	return nil
}

// lastLineOf quotes the script's last line of stderr (or stdout) so the one-line error
// already says what went wrong.
func lastLineOf(res runner.Result) string {
	for _, tail := range []string{res.StderrTail, res.StdoutTail} {
		lines := strings.Split(strings.TrimSpace(tail), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
			return ": " + last
		}
	}
	return ""
}
