package cli

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/workflows"
)

func runStatus(ctx context.Context, args []string) error {
	fs := newFlagSet("status", "NAME [-o json] [--members | --member MEMBER] [--wait [--timeout D]]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	allMembers := fs.Bool("members", false, "list every member, however many (by default a cluster of more than 50 lists those not ready)")
	member := fs.String("member", "", "show this member alone: its state, where it lives on its host (dir, address, ports), and its runs as the host recorded them")
	wait, timeout := waitFlags(fs, "first wait until the cluster is ready, failed or deleted, showing progress")
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	if *wait {
		final, err := waitFor(ctx, st, name, *timeout, func(s workflows.ClusterStatus) bool { return s.Settled(s.Generation) })
		if err == nil {
			err = settled(final)
		}
		if err != nil {
			return err
		}
	}
	if *member != "" {
		view, err := st.Member(ctx, name, *member)
		if err != nil {
			return err
		}
		if *out == "json" {
			return printJSON(view)
		}
		render.Member(os.Stdout, view.MemberStatus, view.OnHost, time.Now())
		return nil
	}
	status, err := st.Status(ctx, name)
	if err != nil {
		return err
	}
	if *out == "json" {
		return printJSON(status)
	}
	render.Status(os.Stdout, status, time.Now(), *allMembers)
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
