package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// Hosts prints hosts as a table. A host holding its lease was heard from within its
// timeout, which LAST-SEEN says rather than the lease's start.
func Hosts(w io.Writer, hosts []workflows.Host, now time.Time) {
	if len(hosts) == 0 {
		fmt.Fprintln(w, "No hosts: workers run in single-host mode (start them with --host to register hosts).")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tMEMBERS\tLABELS\tADDRESS\tLAST-SEEN\tVERSION\tAGENT\tRUNS")
	for _, h := range hosts {
		seen := "within " + h.Timeout.String()
		if h.Lost {
			seen = Ago(h.LastSeen, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.State(), h.Members, labels(h.Labels), h.Address, seen, orDash(h.Version), agentVersion(h.HostRegistration), admits(h.Admission))
	}
	tw.Flush()
}

// agentVersion is the host's agent's version: "same" when it is its worker's, as after an
// install of one release, so that a host upgraded halfway stands out.
func agentVersion(h workflows.HostRegistration) string {
	if h.AgentVersion != "" && h.AgentVersion == h.Version {
		return "same"
	}
	return orDash(h.AgentVersion)
}

// admits says what a host's allow-lists let it run: "any" without them.
func admits(a workflows.Admission) string {
	var parts []string
	if len(a.Clusters) > 0 {
		parts = append(parts, "clusters "+strings.Join(a.Clusters, ","))
	}
	if len(a.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(a.Namespaces, ","))
	}
	if a.EnvOverride {
		parts = append(parts, "loader variables")
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, "; ")
}

func labels(l map[string]string) string {
	if len(l) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// Orphans prints the orphans found, and whether they were removed.
func Orphans(w io.Writer, orphans []starter.Orphan) {
	if len(orphans) == 0 {
		fmt.Fprintln(w, "No orphans: every cluster with files on a host has a running workflow.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tCLUSTER\tWORKFLOW\tMEMBERS\t")
	for _, o := range orphans {
		members := strings.Join(o.Members, ",")
		if o.MoreMembers > 0 {
			members += fmt.Sprintf(" and %d more", o.MoreMembers)
		}
		if members == "" {
			members = "-"
		}
		removed := ""
		if o.Removed {
			removed = "removed"
		}
		cluster := o.Cluster
		if o.Home != "" {
			cluster += "@" + o.Home // its folder: the running cluster of the name may be another
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Host, cluster, o.Workflow, members, removed)
	}
	tw.Flush()
}

// orDash shows what a host's worker did not say (one of before versions, say) as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
