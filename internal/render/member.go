package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// Member shows one member (status --member): its state in the cluster, where it lives,
// and the runs of its scripts as its host recorded them, with its output's last lines.
func Member(w io.Writer, m workflows.MemberStatus, onHost backend.MemberDescription, now time.Time) {
	host := m.Host
	if host == "" {
		host = workflows.LocalHost
	}
	fmt.Fprintf(w, "Member:   %s (role %s, ordinal %d)\n", m.Name, m.Role, m.Ordinal)
	state := fmt.Sprintf("%s since %s", m.State, Ago(m.Since, now))
	if m.Detail != "" {
		state += ": " + m.Detail
	}
	fmt.Fprintf(w, "State:    %s\n", state)
	fmt.Fprintf(w, "Host:     %s\n", host)
	if onHost.Missing {
		fmt.Fprintf(w, "On host:  none: %s holds no sandbox of it (removed, or not made yet)\n", host)
	} else {
		fmt.Fprintf(w, "Address:  %s\nDir:      %s\n", onHost.Address, onHost.Dir)
	}
	if len(m.Ports) > 0 {
		var ports []string
		for _, name := range slices.Sorted(maps.Keys(m.Ports)) {
			ports = append(ports, fmt.Sprintf("%s=%d", name, m.Ports[name]))
		}
		fmt.Fprintf(w, "Ports:    %s\n", strings.Join(ports, " "))
	}
	if len(onHost.Runs) > 0 {
		fmt.Fprintf(w, "\nRUNS (as its host recorded them, oldest first; at most the latest %d)\n", backend.MaxDescribedRuns)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tSTARTED\tTOOK\tOUTCOME")
		for _, r := range onHost.Runs {
			took, outcome := "-", r.Outcome
			if r.Outcome != "running" && r.Outcome != "lost" {
				took = r.Duration.Round(time.Millisecond).String()
				outcome = fmt.Sprintf("%s %d", r.Outcome, r.ExitCode)
			}
			if r.Failure != "" {
				outcome += ": " + r.Failure
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Event, Ago(r.Started, now), took, outcome)
		}
		tw.Flush()
	}
	Tails(w, m)
}
