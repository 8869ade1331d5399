package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
)

func runMaintenance(ctx context.Context, args []string) error {
	fs := newFlagSet("maintenance", "on --reason TEXT | off | status [-o json]")
	var conn connection
	conn.register(fs, "warn")
	reason := fs.String("reason", "", "with on: why, shown to everyone refused while maintenance is on")
	out := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 1 {
		return apperr.Errorf(apperr.Invalid, "maintenance takes one of on, off or status")
	}
	action := fs.Arg(0)
	switch action {
	case "on", "off", "status":
	default:
		return apperr.Errorf(apperr.Invalid, "maintenance %q: say on, off or status", action)
	}
	if action != "on" && *reason != "" {
		return apperr.Errorf(apperr.Invalid, "--reason: only applies with on")
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if action == "status" {
		m, err := st.Maintenance(ctx)
		if err != nil {
			return err
		}
		if *out == "json" {
			return printJSON(m)
		}
		fmt.Println(describeMaintenance(m))
		return nil
	}
	began := time.Now()
	res, err := st.SetMaintenance(ctx, action == "on", *reason)
	if err != nil {
		return err
	}
	if *out == "json" {
		return printJSON(res)
	}
	fmt.Printf("%s. Clusters told: %d, in %s.\n", describeMaintenance(res.Maintenance), res.Clusters, time.Since(began).Round(time.Millisecond))
	return nil
}

func describeMaintenance(m workflows.Maintenance) string {
	if !m.On {
		return "Maintenance is off"
	}
	return "M" + m.Describe()[1:]
}
