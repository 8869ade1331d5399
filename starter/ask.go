package starter

// Queries that outlast a worker cut off from the server, or a server busy for a moment.

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
)

// queryAttempt is the first attempt's deadline for a query; each unanswered attempt gives
// the next half as long again. At 3 s, a full run's fleet test saw every attempt expire on
// a loaded server before its worker answered ("query task not found, or already expired"):
// an attempt must outlast a loaded server as well as a dead poll.
const queryAttempt = 5 * time.Second

// askPatiently calls ask (a query) until it is answered, for up to patience, or the
// context's deadline if sooner. Each attempt has a deadline of its own, from queryAttempt
// up: a worker cut off from the server with its polls still open takes a query for each
// of them and never answers (fleet tests saw `hosts` and `status` fail so while one of two
// hosts was cut, the workflow held by that host's worker), and only once those polls are
// spent does the server send the query to a worker that polls. While the server is busy
// (busyServer) it waits a growing delay before asking again. Any other error ends it at
// once. It returns ask's last error.
func askPatiently(ctx context.Context, patience time.Duration, ask func(context.Context) error) error {
	giveUp := time.Now().Add(patience)
	attempt := queryAttempt
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		deadline := time.Now().Add(attempt)
		if deadline.After(giveUp) {
			deadline = giveUp
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := ask(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		busy := busyServer(err)
		if !busy && !noAnswer(err) {
			return err
		}
		wait := delay
		if !busy {
			wait, attempt = 0, attempt*3/2 // unanswered: the next open poll, at once
		}
		if !time.Now().Add(wait).Before(giveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// noAnswer recognises a query that no worker picked up in time, or that the server did not
// even dispatch because no worker has polled lately (say, right after a server restart).
func noAnswer(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	var notReady *serviceerror.WorkflowNotReady
	var precondition *serviceerror.FailedPrecondition
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &notReady) ||
		errors.As(err, &precondition) && strings.Contains(precondition.Error(), "no poller seen")
}

// busyServer recognises a call the server did not carry out for now: no worker polled the
// queue lately (its polls may be failing for load), or the server refused it for load.
func busyServer(err error) bool {
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	var precondition *serviceerror.FailedPrecondition
	return errors.As(err, &unavailable) || errors.As(err, &exhausted) ||
		errors.As(err, &precondition) && strings.Contains(precondition.Error(), "no poller seen")
}
