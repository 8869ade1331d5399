package cli

import (
	"context"
	"os"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
)

// runSet changes settings of one role in the cluster's desired spec, which it reads from
// the cluster, and applies the result as apply would: no spec file to copy and edit.
func runSet(ctx context.Context, args []string) error {
	fs := newFlagSet("set", "NAME ROLE env NAME=VALUE|NAME-... [--dry-run] [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	signKeyFlag(fs, &conn.signKey)
	wait, timeout := waitFlags(fs, "wait until the cluster runs the new settings (or fails), showing progress")
	dryRun := fs.Bool("dry-run", false, "print what the change would do (the revision, the rollout's batches), and change nothing")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() < 4 {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "set takes a cluster NAME, a ROLE, env, and at least one NAME=VALUE (or NAME- to remove it)")
	}
	name, role, what := fs.Arg(0), fs.Arg(1), fs.Arg(2)
	if what != "env" {
		return apperr.Errorf(apperr.Invalid, "set %s: only env can be set (set NAME ROLE env NAME=VALUE); change other settings with apply -f", what)
	}
	changes, err := parseEnvChanges(fs.Args()[3:])
	if err != nil {
		return err
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	edited, err := st.EditEnv(ctx, name, role, changes)
	if err != nil {
		return err
	}
	if *dryRun {
		preview, err := st.Preview(ctx, name, &edited.Spec, nil)
		if err == nil {
			render.Preview(os.Stdout, name, preview)
		}
		return err
	}
	res, err := st.ApplyEdited(ctx, edited)
	if err != nil {
		return err
	}
	return reportChange(ctx, st, name, res, *wait, *timeout)
}

// parseEnvChanges reads NAME=VALUE (set) and NAME- (remove) arguments, as `kubectl set env`
// does; whether a name is allowed is checked with the role's env (starter.EditEnv).
func parseEnvChanges(args []string) ([]starter.EnvChange, error) {
	var changes []starter.EnvChange
	for _, arg := range args {
		if name, value, ok := strings.Cut(arg, "="); ok {
			changes = append(changes, starter.EnvChange{Name: name, Value: value})
			continue
		}
		if name, ok := strings.CutSuffix(arg, "-"); ok && name != "" {
			changes = append(changes, starter.EnvChange{Name: name, Remove: true})
			continue
		}
		return nil, apperr.Errorf(apperr.Invalid, "%q is not NAME=VALUE, or NAME- to remove the variable", arg)
	}
	return changes, nil
}
