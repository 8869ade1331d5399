package plan

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/spec"
)

// HostRegistration is what a worker says about its host when it starts, and again at each
// check-in.
type HostRegistration struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Timeout is how long the host may go unheard of before it is lost.
	Timeout time.Duration `json:"timeout"`
	BootID  string        `json:"bootID,omitempty"`
	// Version is the release and commit of the host's worker (clusterflow version), which an
	// upgrade in place changes host by host.
	Version string `json:"version,omitempty"`
	// AgentVersion is the release and commit of the host's agent, which runs its scripts and
	// may be upgraded apart from its worker (the shipped systemd units); empty when the
	// worker could not ask it.
	AgentVersion string `json:"agentVersion,omitempty"`
	// Admission is what the host lets run, which placement respects and the host enforces.
	Admission
}

// Admission is what a host lets run: the clusters and namespaces it serves, and whether a
// spec may set loader variables (worker --allow-clusters, --allow-namespaces,
// --allow-env-override). Empty lists allow everything.
type Admission struct {
	// Clusters are globs (path.Match) of cluster names.
	Clusters []string `json:"allowClusters,omitempty"`
	// Namespaces are the Temporal namespaces whose clusters the host serves.
	Namespaces []string `json:"allowNamespaces,omitempty"`
	// EnvOverride lets a role's env set loader variables (LoaderVariable).
	EnvOverride bool `json:"allowEnvOverride,omitempty"`
}

// Refuses says why the host does not run a role of cluster in namespace with an env of
// these names, or returns "". An empty namespace is not checked (a client that cannot
// tell); the host itself always knows its task's.
func (a Admission) Refuses(cluster, namespace string, envNames []string) string {
	if len(a.Clusters) > 0 && !slices.ContainsFunc(a.Clusters, func(glob string) bool {
		ok, _ := path.Match(glob, cluster)
		return ok
	}) {
		return fmt.Sprintf("runs only clusters %s, not %s", strings.Join(a.Clusters, ","), cluster)
	}
	if namespace != "" && len(a.Namespaces) > 0 && !slices.Contains(a.Namespaces, namespace) {
		return fmt.Sprintf("serves only namespaces %s, not %s", strings.Join(a.Namespaces, ","), namespace)
	}
	if !a.EnvOverride {
		for _, name := range slices.Sorted(slices.Values(envNames)) {
			if LoaderVariable(name) {
				return fmt.Sprintf("lets no spec set the loader variable %s (worker --allow-env-override)", name)
			}
		}
	}
	return ""
}

// LoaderVariable reports whether an env variable chooses what code a script runs rather
// than configuring it: the dynamic loader's, the C library's that setuid programs ignore
// for the same reason, and the shell's start-up files and parsing. Set from a spec, any of
// them runs the spec's code inside a script the host trusts.
func LoaderVariable(name string) bool {
	if strings.HasPrefix(name, "LD_") {
		return true
	}
	switch name {
	case "PATH", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
		"NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
		"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH":
		return true
	}
	return false
}

// HostState is a host's state as users see it.
type HostState string

const (
	HostReady    HostState = "ready"
	HostCordoned HostState = "cordoned"
	HostDraining HostState = "draining"
	HostLost     HostState = "lost"
)

// Host is one host as the registry keeps it.
type Host struct {
	HostRegistration
	// Lost is set while the host's lease is broken; Cordoned and Draining are the
	// operator's marks, kept while it is lost.
	Lost     bool `json:"lost,omitempty"`
	Cordoned bool `json:"cordoned,omitempty"`
	Draining bool `json:"draining,omitempty"`
	// LastSeen is when the host last renewed or took its lease.
	LastSeen time.Time `json:"lastSeen"`
	// Members counts the members clusters placed on the host.
	Members int `json:"members"`
	// refuses is why the host's allow-lists refuse the role being placed (hostCheck).
	refuses string
}

// HostDocument is a host as `clusterflow hosts -o json` prints it: its state in one word,
// and its timeout as a duration ("1m0s"), as the status JSON writes them.
type HostDocument struct {
	Name    string            `json:"name"`
	State   HostState         `json:"state"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	Members int               `json:"members"`
	// LastSeen is when the host last renewed or took its lease; Timeout, how long it may
	// go unheard of before it is lost.
	LastSeen time.Time `json:"lastSeen"`
	Timeout  string    `json:"timeout"`
	BootID   string    `json:"bootID,omitempty"`
	Version  string    `json:"version,omitempty"`
	// AgentVersion is the host's agent's (HostRegistration.AgentVersion).
	AgentVersion string `json:"agentVersion,omitempty"`
	// Cordoned and Draining are the operator's marks, which a lost host keeps.
	Cordoned bool `json:"cordoned,omitempty"`
	Draining bool `json:"draining,omitempty"`
	Admission
}

// Document is the host as `clusterflow hosts -o json` prints it.
func (h Host) Document() HostDocument {
	return HostDocument{
		Name: h.Name, State: h.State(), Address: h.Address, Labels: h.Labels, Members: h.Members,
		LastSeen: h.LastSeen, Timeout: h.Timeout.String(), BootID: h.BootID, Version: h.Version, AgentVersion: h.AgentVersion,
		Cordoned: h.Cordoned, Draining: h.Draining, Admission: h.Admission,
	}
}

// State is the host's state: lost outranks draining, which outranks cordoned.
func (h Host) State() HostState {
	switch {
	case h.Lost:
		return HostLost
	case h.Draining:
		return HostDraining
	case h.Cordoned:
		return HostCordoned
	}
	return HostReady
}

// HostNamed finds a host in a list sorted by name, in O(log n): a cluster's view of a fleet
// of thousands of hosts is looked up once per member.
func HostNamed(hosts []Host, name string) *Host {
	i, found := slices.BinarySearchFunc(hosts, name, func(h Host, name string) int { return strings.Compare(h.Name, name) })
	if !found {
		return nil
	}
	return &hosts[i]
}

// SortHosts sorts hosts by name, as HostNamed needs, cloning only a list out of order.
func SortHosts(hosts []Host) []Host {
	byName := func(a, b Host) int { return strings.Compare(a.Name, b.Name) }
	if slices.IsSortedFunc(hosts, byName) {
		return hosts
	}
	return slices.SortedFunc(slices.Values(hosts), byName)
}

// Schedulable reports whether the host may get new members.
func (h Host) Schedulable() bool { return h.State() == HostReady }

// hostCheck is what placement asks of each host's allow-lists (Admission): nothing in runs
// that began before hosts had them (change.HostAllowLists). An empty namespace is not
// checked: a client placing ahead of the workflow does not know it.
type HostCheck struct {
	On        bool
	Namespace string
}

// hostsFor returns the hosts with what each refuses of role r of the cluster marked, so
// that placement passes them over; members already on them stay and count as before.
func (c HostCheck) HostsFor(hosts []Host, cluster string, r spec.Role) []Host {
	if !c.On {
		return hosts
	}
	envNames := slices.Sorted(maps.Keys(r.Env))
	out := slices.Clone(hosts)
	for i := range out {
		out[i].refuses = out[i].Refuses(cluster, c.Namespace, envNames)
	}
	return out
}

// placeMembers gives each member without a host one that fits the role's placement, or
// says why none fits in the member's Unplaced. Members of the role that already have a
// host count towards maxPerHost and spreading.
func PlaceMembers(role spec.Role, members []Member, hosts []Host) []Member {
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
	if err := PlacementShortfall(role, members, hosts, want); err != nil {
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

// placementShortfall says why want members of the role do not fit on the hosts, counting
// the role's members already placed, or returns nil.
func PlacementShortfall(r spec.Role, members []Member, hosts []Host, want int) error {
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
	return Abbreviate(items)
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
	return Abbreviate(parts)
}

// abbreviate writes a list as "a, b, c", or "a … z" past four items.
func Abbreviate(items []string) string {
	if len(items) > 4 {
		return items[0] + " … " + items[len(items)-1]
	}
	return strings.Join(items, ", ")
}
