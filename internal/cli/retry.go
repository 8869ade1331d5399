package cli

import (
	"context"

	"github.com/clusterflow/clusterflow/internal/apperr"
)

func runRetry(ctx context.Context, args []string) error {
	fs := newFlagSet("retry", "NAME [MEMBER ...] [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	wait, timeout := waitFlags(fs, "wait until the retried members are set up (or fail again), showing progress")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "retry takes a cluster NAME, and optionally the members to retry")
	}
	name := fs.Arg(0)
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := st.Retry(ctx, name, fs.Args()[1:])
	if err != nil {
		return err
	}
	return reportChange(ctx, st, name, res, *wait, *timeout)
}
