package cli

import (
	"context"
	"os"
	"slices"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
)

func runLogs(ctx context.Context, args []string) error {
	fs := newFlagSet("logs", "NAME MEMBER [--event E|ACTION] [--tail N] [-f]")
	var conn connection
	conn.register(fs, "warn")
	event := fs.String("event", "", "the event or action whose output to show (default: the one running now, or the last)")
	tail := fs.Int("tail", 0, "show only the last N lines of each stream so far (0: all)")
	follow := fs.BoolP("follow", "f", false, "keep showing new output while the member runs the event")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 2 {
		return apperr.Errorf(apperr.Invalid, "logs needs a cluster and a member: clusterflow logs NAME MEMBER")
	}
	if *tail < 0 {
		return apperr.Errorf(apperr.Invalid, "--tail: is %d; it must be 0 or more", *tail)
	}
	if *event != "" && !slices.Contains(spec.KnownEvents, spec.Event(*event)) && spec.CheckName(*event) != nil {
		return apperr.Errorf(apperr.Invalid, "--event: %q is neither an event (%s) nor an action's name", *event, spec.EventNames(spec.KnownEvents))
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	return st.Logs(ctx, fs.Arg(0), fs.Arg(1), starter.LogOptions{Event: spec.Event(*event), Tail: *tail, Follow: *follow}, os.Stdout, os.Stderr)
}
