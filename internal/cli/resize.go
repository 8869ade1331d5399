package cli

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/workflows"
)

func runResize(ctx context.Context, args []string) error {
	fs := newFlagSet("resize", "NAME [ROLE=N ...] [--remove MEMBER,...] [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	signKeyFlag(fs, &conn.signKey)
	wait, timeout := waitFlags(fs, "wait until the cluster reaches the new size (or fails), showing progress")
	dryRun := fs.Bool("dry-run", false, "print what the resize would do, and change nothing")
	remove := fs.StringSlice("remove", nil, "take these members away (comma-separated names): each one's role shrinks by as many, and they are the ones that leave")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() < 1 || fs.NArg() < 2 && len(*remove) == 0 {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "resize takes a cluster NAME and at least one ROLE=N or --remove MEMBER")
	}
	counts, err := parseCounts(fs.Args()[1:])
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if *dryRun {
		preview, err := st.PreviewRemoving(ctx, name, counts, *remove)
		if err == nil {
			render.Preview(os.Stdout, name, preview)
		}
		return err
	}
	res, err := st.ResizeRemoving(ctx, name, counts, *remove)
	if err != nil {
		return err
	}
	return reportChange(ctx, st, name, res, *wait, *timeout)
}

// parseCounts reads ROLE=N arguments. Whether the role and count are allowed is the
// cluster's to say, so a negative N goes through to be refused there.
func parseCounts(args []string) ([]workflows.RoleCount, error) {
	var counts []workflows.RoleCount
	for _, arg := range args {
		role, n, ok := strings.Cut(arg, "=")
		members, err := strconv.Atoi(n)
		if !ok || role == "" || err != nil {
			return nil, apperr.Errorf(apperr.Invalid, "%q is not ROLE=N (for example worker=4)", arg)
		}
		counts = append(counts, workflows.RoleCount{Role: role, Members: members})
	}
	return counts, nil
}
