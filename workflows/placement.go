package workflows

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Placement decides which host gets each new member. It is pure and deterministic: hosts
// are taken in name order, fewest of the role's members first, and with spreadBy the label
// value holding the fewest of the role's members comes first.

// hostCheck is what placement asks of each host's allow-lists (Admission): nothing in runs
// that began before hosts had them (changeHostAllowLists). An empty namespace is not
// checked: a client placing ahead of the workflow does not know it.
type hostCheck struct {
	on        bool
	namespace string
}

// hostsFor returns the hosts with what each refuses of role r of the cluster marked, so
// that placement passes them over; members already on them stay and count as before.
func (c hostCheck) hostsFor(hosts []Host, cluster string, r spec.Role) []Host {
	if !c.on {
		return hosts
	}
	envNames := slices.Sorted(maps.Keys(r.Env))
	out := slices.Clone(hosts)
	for i := range out {
		out[i].refuses = out[i].Refuses(cluster, c.namespace, envNames)
	}
	return out
}

// placeMembers gives each member without a host one that fits the role's placement, or
// says why none fits in the member's Unplaced. Members of the role that already have a
// host count towards maxPerHost and spreading.
func placeMembers(role spec.Role, members []Member, hosts []Host) []Member {
	out := slices.Clone(members)
	perHost := map[string]int{}
	perValue := map[string]int{}
	byName := map[string]Host{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	held := 0
	for _, m := range out {
		if m.Occupies() {
			held++
			perHost[m.Host]++
			perValue[byName[m.Host].Labels[role.Placement.SpreadBy]]++
		}
	}
	for i := range out {
		m := &out[i]
		if m.Host != "" || m.State != MemberPending {
			continue
		}
		best, ok := bestHost(role.Placement, hosts, perHost, perValue)
		if !ok {
			m.Unplaced = "waiting for a host: " + unplacedReason(role, out, hosts, held+1)
			continue
		}
		m.Host, m.Unplaced = best.Name, ""
		held++
		perHost[best.Name]++
		perValue[best.Labels[role.Placement.SpreadBy]]++
	}
	return out
}

// unplacedReason says why no host takes one more member.
func unplacedReason(role spec.Role, members []Member, hosts []Host, want int) string {
	if err := placementShortfall(role, members, hosts, want); err != nil {
		return err.Error()
	}
	return "no ready host fits its placement"
}

// bestHost picks the host for one more member, if any fits.
func bestHost(p spec.Placement, hosts []Host, perHost, perValue map[string]int) (Host, bool) {
	var best Host
	found := false
	better := func(h Host) bool {
		if p.SpreadBy != "" {
			a, b := perValue[h.Labels[p.SpreadBy]], perValue[best.Labels[p.SpreadBy]]
			if a != b {
				return a < b
			}
		}
		if perHost[h.Name] != perHost[best.Name] {
			return perHost[h.Name] < perHost[best.Name]
		}
		return h.Name < best.Name
	}
	for _, h := range hosts {
		if !fits(p, h, perHost[h.Name]) {
			continue
		}
		if !found || better(h) {
			best, found = h, true
		}
	}
	return best, found
}

// fits reports whether host h may take one more of a role's members, holding held already.
func fits(p spec.Placement, h Host, held int) bool {
	return h.Schedulable() && h.refuses == "" && p.Matches(h.Labels) && (p.SpreadBy == "" || h.Labels[p.SpreadBy] != "") &&
		(p.MaxPerHost == 0 || held < p.MaxPerHost)
}

// placementProblem says why the hosts cannot hold the desired members of every role, or
// returns nil. Members already on a host that is not lost stay there, even if it takes no
// new members (cordoned, draining); the rest need room on ready hosts that fit.
func placementProblem(desired spec.Cluster, roles []plan.RoleState, allHosts []Host, check hostCheck) error {
	for i, r := range desired.Roles {
		hosts := check.hostsFor(allHosts, desired.Name, r)
		if r.Members == 0 {
			continue
		}
		var members []Member
		if rs := plan.RoleOf(roles, r.Name); rs != nil {
			members = rs.Members
		}
		if err := placementShortfall(r, members, hosts, r.Members); err != nil {
			return fmt.Errorf("roles[%d].%w", i, err)
		}
	}
	return nil
}

// placementShortfall says why want members of the role do not fit on the hosts, counting
// the role's members already placed, or returns nil.
func placementShortfall(r spec.Role, members []Member, hosts []Host, want int) error {
	p := r.Placement
	held := map[string]int{}
	for _, m := range members {
		if m.Occupies() {
			held[m.Host]++
		}
	}
	var ready []string
	room, unlimited := 0, false
	for _, h := range hosts {
		switch {
		case fits(p, h, 0):
			ready = append(ready, h.Name)
			if p.MaxPerHost == 0 {
				unlimited = true
			}
			room += max(p.MaxPerHost, held[h.Name])
		case !h.Lost:
			room += held[h.Name] // kept where they are, but no more
		}
	}
	if unlimited || want <= room {
		return nil
	}
	matching := "hosts"
	if sel := p.Selector(); sel != "" {
		matching = "hosts matching " + sel
	}
	if p.SpreadBy != "" {
		matching += " with a " + p.SpreadBy + " label"
	}
	if len(ready) == 0 && p.MaxPerHost == 0 {
		return fmt.Errorf("placement: %s %s; none is ready (%s)", countOf(want, "member needs", "members need"), matching, describeHosts(hosts))
	}
	need := (want + p.MaxPerHost - 1) / p.MaxPerHost
	return fmt.Errorf("placement: %d members with maxPerHost %d need %d %s; %s ready (%s)",
		want, p.MaxPerHost, need, matching, countOf(len(ready), "is", "are"), abbreviateOr(ready, "none"))
}

// countOf writes n with the singular or plural words after it.
func countOf(n int, singular, plural string) string {
	if n == 1 {
		return "1 " + singular
	}
	return fmt.Sprintf("%d %s", n, plural)
}

func abbreviateOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return abbreviate(items)
}

// describeHosts lists hosts with their states, for a refusal that finds none ready.
func describeHosts(hosts []Host) string {
	if len(hosts) == 0 {
		return "no host is registered"
	}
	var parts []string
	for _, h := range hosts {
		if h.refuses != "" && h.Schedulable() {
			parts = append(parts, h.Name+" "+h.refuses)
			continue
		}
		parts = append(parts, h.Name+" "+string(h.State()))
	}
	return abbreviate(parts)
}

// abbreviate writes a list as "a, b, c", or "a … z" past four items.
func abbreviate(items []string) string {
	if len(items) > 4 {
		return items[0] + " … " + items[len(items)-1]
	}
	return strings.Join(items, ", ")
}

// CheckPlacement says why the hosts cannot hold a new cluster's members, or returns nil;
// the starter refuses such a deploy before anything starts. Hosts' allow-lists count,
// but for the namespace, which the workflow checks.
func CheckPlacement(desired spec.Cluster, hosts []Host) error {
	return placementProblem(desired, nil, hosts, hostCheck{on: true})
}
