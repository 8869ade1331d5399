package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// Rollout prints the latest rollout's progress, role by role.
func Rollout(w io.Writer, s workflows.ClusterStatus, now time.Time) {
	ro := s.Rollout
	if ro == nil {
		fmt.Fprintf(w, "Cluster %s: revision %d; no rollout yet.\n", s.Name, max(s.Revision, 1))
		return
	}
	fmt.Fprintf(w, "Cluster %s: %s %s (started %s", s.Name, rolloutName(*ro), ro.State, Ago(ro.Started, now))
	if !ro.Ended.IsZero() {
		fmt.Fprintf(w, ", ended %s", Ago(ro.Ended, now))
	}
	fmt.Fprintln(w, ")")
	if ro.Paused != "" {
		fmt.Fprintf(w, "Paused: %s\n", ro.Paused)
	}
	if len(ro.Roles) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tREVISION\tSTRATEGY\tPOLICY\tUPDATED\tIN WATCH\tWAITING\tFAILED")
	for _, r := range ro.Roles {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%d\t%s\n", r.Role, r.Revision, r.Strategy, r.Policy, r.Updated, names(r.InWatch), r.Waiting, names(r.Failed))
	}
	tw.Flush()
}

func rolloutName(ro workflows.RolloutStatus) string {
	if ro.Restart {
		return "rolling restart"
	}
	return fmt.Sprintf("rollout of revision %d", ro.Revision)
}

func names(list []string) string {
	if len(list) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", len(list), strings.Join(list, ", "))
}

// Revisions lists the cluster's revisions, oldest first.
func Revisions(w io.Writer, s workflows.ClusterStatus, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tAPPLIED\tBY\tDIGEST\tUNDO\tCHANGE")
	for _, r := range s.Revisions {
		undo := "-"
		if r.Kept && r.Number != s.Revision {
			undo = "yes"
		}
		current := ""
		if r.Number == s.Revision {
			current = " (current)"
		}
		by := r.By
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\t%s\t%s\n", r.Number, current, Ago(r.At, now), by, r.Digest, undo, r.Change)
	}
	tw.Flush()
}

// Preview prints what a change would do, in the order it would be done.
func Preview(w io.Writer, name string, p workflows.Preview) {
	if p.Summary == "" {
		fmt.Fprintf(w, "Cluster %s already matches; nothing would change.\n", name)
		return
	}
	fmt.Fprintf(w, "Cluster %s: %s would be generation %d", name, p.Summary, p.Generation)
	if p.Revision > 0 {
		fmt.Fprintf(w, " and revision %d", p.Revision)
	}
	fmt.Fprintln(w, ". Nothing was changed (dry run).")
	for _, r := range p.Roles {
		fmt.Fprintf(w, "\nRole %s:\n", r.Role)
		if len(r.Remove) > 0 {
			fmt.Fprintf(w, "  teardown and remove: %s%s; delnodes to %d members\n", strings.Join(r.Remove, ", "), more(r.MoreRemove), r.Told)
		}
		if len(r.Add) > 0 {
			fmt.Fprintf(w, "  configure: %s%s; addnodes to %d members\n", strings.Join(r.Add, ", "), more(r.MoreAdd), r.Told)
		}
		if ro := r.Rollout; ro != nil {
			fmt.Fprintf(w, "  %s (%s): %s to revision %d, %s\n", ro.Strategy, ro.Changed, verb(ro.Strategy), p.Revision, ro.Policy)
			for i, b := range ro.Batches {
				kind := "batch"
				if b.Canary {
					kind = "canary"
				}
				fmt.Fprintf(w, "    %d. %s: %s\n", i+1, kind, strings.Join(b.Members, ", "))
			}
			if ro.MoreBatches > 0 {
				fmt.Fprintf(w, "    … and %d more batches\n", ro.MoreBatches)
			}
		}
	}
}

func verb(s spec.UpdateStrategy) string {
	if s == spec.Replace {
		return "replace each member"
	}
	return "upgrade each member"
}

func more(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// Action prints an action's run and each member's result, with output tails.
func Action(w io.Writer, a workflows.ActionStatus) {
	fmt.Fprintf(w, "Action %s (%d): %s; %d members ran it, %d succeeded, %d failed\n", a.Action, a.ID, a.State, a.Ran, a.Succeeded, a.Failed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tRESULT\tDETAIL")
	for _, r := range a.Results {
		result := "ok"
		if !r.OK {
			result = "failed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Member, result, r.Detail)
	}
	tw.Flush()
	for _, r := range a.Results {
		if r.StdoutTail != "" || r.StderrTail != "" {
			Tails(w, workflows.MemberStatus{Name: r.Member, Event: spec.Event(a.Action), StdoutTail: r.StdoutTail, StderrTail: r.StderrTail})
		}
	}
}
