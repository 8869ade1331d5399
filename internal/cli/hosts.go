package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func runHosts(ctx context.Context, args []string) error {
	fs := newFlagSet("hosts", "[-o json] [--orphans [--remove]]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	orphans := fs.Bool("orphans", false, "list clusters with files on a host but no running workflow (terminated, say)")
	remove := fs.Bool("remove", false, "with --orphans, remove them, stopping whatever their members left running")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *remove && !*orphans {
		return apperr.Errorf(apperr.Invalid, "--remove: only applies with --orphans")
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "hosts takes no arguments (did you mean `clusterflow host %s`?)", fs.Arg(0))
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if *orphans {
		found, err := st.Orphans(ctx, *remove)
		if *out == "json" {
			if found == nil {
				found = []starter.Orphan{}
			}
			if jsonErr := printJSON(found); jsonErr != nil {
				return jsonErr
			}
		} else {
			render.Orphans(os.Stdout, found)
		}
		return err
	}
	hosts, err := st.Hosts(ctx)
	if err != nil {
		return err
	}
	if *out == "json" {
		docs := make([]workflows.HostDocument, len(hosts))
		for i, h := range hosts {
			docs[i] = h.Document()
		}
		return printJSON(docs)
	}
	render.Hosts(os.Stdout, hosts, time.Now())
	return nil
}

// runHost changes one host: cordon, uncordon, drain or forget.
func runHost(ctx context.Context, args []string) error {
	fs := newFlagSet("host", "cordon|uncordon|drain|forget NAME [--wait] [--timeout D]")
	var conn connection
	conn.register(fs, "warn")
	wait, timeout := waitFlags(fs, "with drain, wait until the host holds no members, showing progress")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 2 {
		return apperr.Errorf(apperr.Invalid, "host needs an action and a host name: clusterflow host cordon|uncordon|drain|forget NAME")
	}
	action, name := fs.Arg(0), fs.Arg(1)
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	var host workflows.Host
	switch action {
	case "cordon", "uncordon":
		host, err = st.CordonHost(ctx, name, action == "cordon")
	case "drain":
		host, err = st.DrainHost(ctx, name)
	case "forget":
		host, err = st.ForgetHost(ctx, name)
	default:
		return apperr.Errorf(apperr.Invalid, "host: unknown action %q (known: cordon, uncordon, drain, forget)", action)
	}
	if err != nil {
		return err
	}
	if action == "drain" && *wait {
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		host, err = st.WaitDrained(ctx, name, func(h workflows.Host) {
			fmt.Printf("host %s: %s, %d members left\n", h.Name, h.State(), h.Members)
		})
		if err != nil {
			return err
		}
		fmt.Printf("host %s drained\n", host.Name)
		return nil
	}
	if action == "forget" {
		fmt.Printf("host %s forgotten\n", host.Name)
		return nil
	}
	fmt.Printf("host %s: %s\n", host.Name, host.State())
	return nil
}
