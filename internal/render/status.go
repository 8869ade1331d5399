// Package render prints clusters for people: status tables, lists and live progress.
package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// tailLines is how many lines of a failed script's output the human status shows; the
// JSON output has the whole 4 KiB tail.
const tailLines = 10

// A cluster of more than listAllUpTo members lists only members that are not ready, at
// most listNotReady of them, unless every member is asked for: a table of thousands of
// ready members hides the few that matter.
const (
	listAllUpTo  = 50
	listNotReady = 20
)

// Status prints a cluster's status as a table: every member, or for a large cluster the
// members that are not ready unless allMembers.
func Status(w io.Writer, s workflows.ClusterStatus, now time.Time, allMembers bool) {
	fmt.Fprintf(w, "Cluster:  %s", s.Name)
	if s.Origin != "" {
		fmt.Fprintf(w, " (from %s)", s.Origin)
	}
	fmt.Fprintf(w, "\nPhase:    %s", s.Phase)
	if s.Message != "" {
		fmt.Fprintf(w, " (%s)", s.Message)
	}
	fmt.Fprintf(w, "\nLevels:   %s", Plan(s.Levels))
	fmt.Fprintf(w, "\nGeneration: %d desired, %d reached", s.Generation, s.ReachedGeneration)
	if s.AttemptedGeneration > s.ReachedGeneration {
		fmt.Fprintf(w, ", %d attempted", s.AttemptedGeneration)
	}
	if s.Revision > 0 {
		fmt.Fprintf(w, "\nRevision: %d", s.Revision)
		if ro := s.Rollout; ro != nil && ro.State != workflows.RolloutDone {
			fmt.Fprintf(w, " (%s %s; `clusterflow rollout status %s`)", rolloutName(*ro), ro.State, s.Name)
		}
	}
	if len(s.Signatures) > 0 {
		fmt.Fprintf(w, "\nSigned:   %s", Signatures(s.Signatures))
	}
	if hint := RetryHint(s); hint != "" {
		fmt.Fprintf(w, "\nHint:     %s", hint)
	}
	if n := len(s.Actions); n > 0 {
		a := s.Actions[n-1]
		fmt.Fprintf(w, "\nAction:   %s (%d) %s: %d ran, %d succeeded, %d failed", a.Action, a.ID, a.State, a.Ran, a.Succeeded, a.Failed)
	}
	fmt.Fprint(w, "\n\n")

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tLEVEL\tREADY\tMEMBERS")
	for _, r := range s.Roles {
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\n", r.Name, r.Level, r.Ready, r.Desired, RoleCounts(r))
	}
	tw.Flush()
	for _, r := range s.Roles {
		if r.Paused != "" {
			fmt.Fprintf(w, "Role %s: %s\n", r.Name, r.Paused)
		}
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	onHosts := false
	for _, r := range s.Roles {
		for _, m := range r.Members {
			onHosts = onHosts || m.Host != ""
		}
	}
	if onHosts {
		fmt.Fprintln(tw, "MEMBER\tSTATE\tHOST\tSINCE\tDETAIL")
	} else {
		fmt.Fprintln(tw, "MEMBER\tSTATE\tSINCE\tDETAIL")
	}
	var failed []workflows.MemberStatus
	total, listed := 0, 0
	for _, r := range s.Roles {
		total += len(r.Members)
	}
	summarise := total > listAllUpTo && !allMembers
	shown := membersToShow(s, summarise)
	for _, m := range shown {
		if summarise && listed == listNotReady {
			break
		}
		listed++
		detail := m.Detail
		if m.LastLine != "" {
			detail += ": " + m.LastLine
		}
		state := string(m.State)
		if m.Leaving {
			state += " (leaving)"
		}
		if m.Replaces != "" {
			detail = strings.TrimPrefix(detail+"; replaces "+m.Replaces, "; ")
		}
		if onHosts {
			host := m.Host
			if host == "" {
				host = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, state, host, Ago(m.Since, now), detail)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, state, Ago(m.Since, now), detail)
		}
		if m.StdoutTail != "" || m.StderrTail != "" {
			failed = append(failed, m)
		}
	}
	tw.Flush()
	if summarise {
		more := ""
		if len(shown) > listed {
			more = fmt.Sprintf("… and %d more not ready; ", len(shown)-listed)
		}
		fmt.Fprintf(w, "%s%d of %d members ready (`--members` lists every member)\n", more, total-len(shown), total)
	}
	Health(w, s)
	for _, m := range failed {
		Tails(w, m)
	}
	FailedTeardowns(w, s, now)
}

// FailedTeardowns prints the latest teardowns that failed, with their output.
func FailedTeardowns(w io.Writer, s workflows.ClusterStatus, now time.Time) {
	if len(s.FailedTeardowns) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFailed teardowns (the members were removed all the same; `clusterflow logs %s MEMBER --event teardown`):\n", s.Name)
	for _, f := range s.FailedTeardowns {
		fmt.Fprintf(w, "  %s (%s, generation %d, %s): %s\n", f.Member, f.Reason, f.Generation, Ago(f.At, now), f.Detail)
		TeardownTails(w, f)
	}
}

// TeardownTails prints the end of a failed teardown's output.
func TeardownTails(w io.Writer, f workflows.FailedTeardown) {
	Tails(w, workflows.MemberStatus{Name: f.Member, Event: spec.EventTeardown, StdoutTail: f.StdoutTail, StderrTail: f.StderrTail})
}

// healthLines is how many of a member's latest health transitions status shows.
const healthLines = 3

// Health prints the latest health transitions of members that have any.
func Health(w io.Writer, s workflows.ClusterStatus) {
	for _, r := range s.Roles {
		for _, m := range r.Members {
			if m.Health == nil || (len(m.Health.Transitions) == 0 && m.Health.LastCheck == nil) {
				continue
			}
			fmt.Fprintf(w, "\n%s health (latest last):\n", m.Name)
			if c := m.Health.LastCheck; c != nil {
				fmt.Fprintf(w, "  last check reported (its host reports only checks that change its health): %s\n", CheckLine(*c))
			}
			transitions := m.Health.Transitions
			if len(transitions) > healthLines {
				transitions = transitions[len(transitions)-healthLines:]
			}
			for _, t := range transitions {
				line := fmt.Sprintf("  %s  %s → %s on %s", t.At.UTC().Format(time.DateTime), t.From, t.To, t.Event)
				if t.Reason != "" {
					line += ": " + t.Reason
				}
				if t.Source != "" {
					line += " (from " + t.Source + ")"
				}
				fmt.Fprintln(w, line)
			}
		}
	}
}

// CheckLine is one line of a member's own check: when, how it ended, how many in a row.
func CheckLine(c spec.ProbeCheck) string {
	line := fmt.Sprintf("%s %s, %d in a row", c.At.UTC().Format(time.DateTime), c.Result, c.InARow)
	if c.Host != "" {
		line += " on " + c.Host
	}
	if out := strings.TrimSpace(c.Output); out != "" {
		lines := strings.Split(out, "\n")
		line += ": " + strings.TrimSpace(lines[len(lines)-1])
	}
	return line
}

// Tails prints the end of a member's script output.
func Tails(w io.Writer, m workflows.MemberStatus) {
	for _, t := range []struct{ name, text string }{{"stdout", m.StdoutTail}, {"stderr", m.StderrTail}} {
		lines := strings.Split(strings.TrimRight(t.text, "\n"), "\n")
		if strings.TrimSpace(t.text) == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s %s (last lines of %s):\n", m.Name, t.name, m.Event)
		if len(lines) > tailLines {
			lines = lines[len(lines)-tailLines:]
		}
		for _, line := range lines {
			fmt.Fprintf(w, "  | %s\n", line)
		}
	}
}

// Plan shows dependency levels as "controller → worker, gateway → edge".
func Plan(levels [][]string) string {
	parts := make([]string, len(levels))
	for i, level := range levels {
		parts[i] = strings.Join(level, ", ")
	}
	return strings.Join(parts, " → ")
}

// stateOrder is the order states are counted in, following a member's life.
var stateOrder = []workflows.MemberState{
	workflows.MemberPending, workflows.MemberCreating, workflows.MemberConfiguring, workflows.MemberReady,
	workflows.MemberDown, workflows.MemberFlapping, workflows.MemberReplacing, workflows.MemberRogue,
	workflows.MemberConfigError, workflows.MemberDeleting, workflows.MemberDeleted,
}

// trouble are the states a reader of a large cluster's status looks for first.
var trouble = []workflows.MemberState{
	workflows.MemberConfigError, workflows.MemberDown, workflows.MemberFlapping, workflows.MemberRogue, workflows.MemberReplacing,
}

// membersToShow lists every member, or when summarising the members that are not ready:
// those in trouble first, so that the first failures among thousands of pending members
// are the ones shown.
func membersToShow(s workflows.ClusterStatus, summarise bool) []workflows.MemberStatus {
	var first, rest []workflows.MemberStatus
	for _, r := range s.Roles {
		for _, m := range r.Members {
			switch {
			case !summarise:
				rest = append(rest, m)
			case slices.Contains(trouble, m.State):
				first = append(first, m)
			case m.State != workflows.MemberReady:
				rest = append(rest, m)
			}
		}
	}
	return append(first, rest...)
}

// RoleCounts summarises members by state, e.g. "3 ready, 5 configuring".
func RoleCounts(r workflows.RoleStatus) string {
	counts, total := r.States, r.MemberCount
	if counts == nil { // a worker older than the counts: count the members listed
		counts, total = map[workflows.MemberState]int{}, len(r.Members)
		for _, m := range r.Members {
			counts[m.State]++
		}
	}
	var parts []string
	for _, state := range stateOrder {
		if counts[state] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[state], state))
		}
	}
	// A shrink in progress: say so rather than leave "5/2 ready" unexplained.
	if extra := total - counts[workflows.MemberDeleted] - r.Desired; extra > 0 && r.Desired >= 0 {
		parts = append(parts, fmt.Sprintf("%d to remove", extra))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Ago renders how long ago t was, coarsely.
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// Signatures says who signed each recent generation's spec, newest first: "3 by ops, 2
// unsigned, 1 by ops".
func Signatures(sigs []workflows.GenerationSignature) string {
	parts := make([]string, len(sigs))
	for i, sig := range sigs {
		if sig.Key == "" {
			parts[i] = fmt.Sprintf("generation %d unsigned", sig.Generation)
		} else {
			parts[i] = fmt.Sprintf("generation %d by %s", sig.Generation, sig.Key)
		}
	}
	return strings.Join(parts, ", ")
}

// RetryHint, for a failed cluster with members whose configure or a notification failed, says how to run it
// again once the cause is fixed; "" otherwise.
func RetryHint(s workflows.ClusterStatus) string {
	if s.Phase != workflows.PhaseFailed {
		return ""
	}
	for _, r := range s.Roles {
		for _, m := range r.Members {
			if m.State == workflows.MemberConfigError && (m.Event == spec.EventConfigure || m.Event == "" || m.Event.Notifies()) {
				return fmt.Sprintf("`clusterflow retry %s` runs the failed configures and notifications again (`clusterflow logs %s %s` shows the output)", s.Name, s.Name, m.Name)
			}
		}
	}
	return ""
}
