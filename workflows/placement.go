package workflows

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// Placement decides which host gets each new member. It is pure and deterministic: hosts
// are taken in name order, fewest of the role's members first, and with spreadBy the label
// value holding the fewest of the role's members comes first.

// occupies reports whether a member counts against its host's share of the role.
func (m Member) occupies() bool {
	switch m.State {
	case MemberDeleted, MemberRogue, MemberReplacing:
		return false
	}
	return m.Host != "" && !m.Leaving
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
		if m.occupies() {
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
			m.Unplaced = "waiting for a host: " + placementShortfall(role, hosts, held+1).Error()
			continue
		}
		m.Host, m.Unplaced = best.Name, ""
		held++
		perHost[best.Name]++
		perValue[best.Labels[role.Placement.SpreadBy]]++
	}
	return out
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
	return h.Schedulable() && p.Matches(h.Labels) && (p.SpreadBy == "" || h.Labels[p.SpreadBy] != "") &&
		(p.MaxPerHost == 0 || held < p.MaxPerHost)
}

// placementProblem says why the hosts cannot hold the desired members of every role, or
// returns nil. Members already placed on a host that can keep them stay where they are;
// the check is on capacity, so it is the same for a deploy, a resize or an apply.
func placementProblem(desired spec.Cluster, hosts []Host) error {
	for i, r := range desired.Roles {
		if r.Members == 0 {
			continue
		}
		if err := placementShortfall(r, hosts, r.Members); err != nil {
			return fmt.Errorf("roles[%d].%w", i, err)
		}
	}
	return nil
}

// placementShortfall says why want members of the role do not fit on the hosts, or nil.
func placementShortfall(r spec.Role, hosts []Host, want int) error {
	var ready []string
	for _, h := range hosts {
		if fits(r.Placement, h, 0) {
			ready = append(ready, h.Name)
		}
	}
	p := r.Placement
	matching := "hosts"
	if sel := p.Selector(); sel != "" {
		matching = "hosts matching " + sel
	}
	if p.SpreadBy != "" {
		matching += " with a " + p.SpreadBy + " label"
	}
	switch {
	case len(ready) == 0:
		return fmt.Errorf("placement: %d %s %s; none is ready (%s)", want, map[bool]string{true: "member needs", false: "members need"}[want == 1], matching, describeHosts(hosts))
	case p.MaxPerHost > 0 && want > p.MaxPerHost*len(ready):
		need := (want + p.MaxPerHost - 1) / p.MaxPerHost
		return fmt.Errorf("placement: %d members with maxPerHost %d need %d %s; %d are ready (%s)",
			want, p.MaxPerHost, need, matching, len(ready), abbreviate(ready))
	}
	return nil
}

// describeHosts lists hosts with their states, for a refusal that finds none ready.
func describeHosts(hosts []Host) string {
	if len(hosts) == 0 {
		return "no host is registered"
	}
	var parts []string
	for _, h := range hosts {
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
// the starter refuses such a deploy before anything starts.
func CheckPlacement(desired spec.Cluster, hosts []Host) error {
	return placementProblem(desired, hosts)
}
