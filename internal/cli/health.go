package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func runSignal(ctx context.Context, args []string) error {
	fs := newFlagSet("signal", "NAME MEMBER EVENT [--reason TEXT] [--source TEXT]")
	var conn connection
	conn.register(fs, "warn")
	reason := fs.String("reason", "", "why, as the reporting service sees it; shown in status")
	source := fs.String("source", "cli", "who reports it; shown in status")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 3 {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "signal takes a cluster NAME, a MEMBER and an EVENT (down, up, gone or unhealthy), got %d arguments", fs.NArg())
	}
	name, ev := fs.Arg(0), workflows.MemberEvent{Member: fs.Arg(1), Event: workflows.HealthEvent(fs.Arg(2)), Reason: *reason, Source: *source}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := st.ReportMemberEvent(ctx, name, ev)
	if err != nil {
		return err
	}
	if res.Ignored != "" {
		fmt.Printf("%s: %s ignored (%s).\n", res.Member, ev.Event, res.Ignored)
		return nil
	}
	fmt.Printf("%s: %s → %s\n", res.Member, res.From, res.To)
	return nil
}

func runResume(ctx context.Context, args []string) error {
	return onCluster(ctx, "resume", args, resume)
}

func resume(ctx context.Context, st *starter.Starter, name string) error {
	res, err := st.Resume(ctx, name)
	if err != nil {
		return err
	}
	if len(res.Roles) > 0 {
		fmt.Printf("Resumed automatic replacement of %s in %s: members gone, or down longer than replaceAfter, are replaced now; others when their replaceAfter ends.\n", strings.Join(res.Roles, ", "), name)
	}
	if len(res.Members) > 0 {
		fmt.Printf("No longer flapping: %s.\n", andMore(res.Members, res.MoreMembers))
	}
	return nil
}

func runReconcile(ctx context.Context, args []string) error {
	return onCluster(ctx, "reconcile", args, reconcile)
}

func reconcile(ctx context.Context, st *starter.Starter, name string) error {
	report, err := st.Reconcile(ctx, name)
	if err != nil {
		return err
	}
	fmt.Printf("The backend has %d member sandboxes for %s.\n", report.Listed, name)
	if len(report.Rogues) > 0 {
		fmt.Printf("Removing members clusterflow did not know: %s.\n", andMore(report.Rogues, report.MoreRogues))
	}
	if len(report.Gone) > 0 {
		fmt.Printf("Gone from the backend, so treated as gone: %s.\n", andMore(report.Gone, report.MoreGone))
	}
	if report.Deferred != "" {
		fmt.Printf("Note: %s.\n", report.Deferred)
	}
	if len(report.Rogues) == 0 && len(report.Gone) == 0 && report.Deferred == "" {
		fmt.Println("Nothing to do: the members match.")
	}
	return nil
}

// andMore lists names, and how many more an answer counted without naming them.
func andMore(names []string, more int) string {
	text := strings.Join(names, ", ")
	if more > 0 {
		text += fmt.Sprintf(" and %d more", more)
	}
	return text
}
