// Package spec defines cluster specs: how they are written (YAML), validated and shipped to
// the workflow (JSON, with startscript contents inlined so a cluster is self-contained).
package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event is a lifecycle event a startscript is run for.
type Event string

const (
	EventConfigure Event = "configure"
	EventAddNodes  Event = "addnodes"
	EventDelNodes  Event = "delnodes"
	EventTeardown  Event = "teardown"
	// EventStart brings a member's services back after its host restarted (a new boot
	// ID). A role gets it only by listing it in events.
	EventStart Event = "start"
	// EventUpgrade moves a member to a new revision of its role (its script and env) in
	// place, during a rollout; EventRestart restarts its services (a rolling restart).
	EventUpgrade Event = "upgrade"
	EventRestart Event = "restart"
	// EventDecommission runs on a member about to leave by a shrink, a replacement or a
	// drain, before its teardown: its data is still there and its peers still run, so it
	// can hand its data over. A role gets it only by listing it in events.
	EventDecommission Event = "decommission"
	// EventRemoving tells the survivors that know members about to leave by a shrink, a
	// replacement or a drain of them, before those members' decommission and teardown:
	// while the leaving members still run, so that one survivor (a Redis Cluster's admin,
	// say) can move their data off for them all. A role gets it only by listing it.
	EventRemoving Event = "removing"
	// EventCheck is a member's own health check, which its host's agent runs every
	// probe.every while the member is ready (see Probe). A role gets it only by listing it.
	EventCheck Event = "check"
)

// AllEvents is the default subscription: every event but start, in lifecycle order.
var AllEvents = []Event{EventConfigure, EventAddNodes, EventDelNodes, EventTeardown}

// KnownEvents is every event a role may subscribe to.
var KnownEvents = append(slices.Clone(AllEvents), EventStart, EventUpgrade, EventRestart, EventDecommission, EventRemoving, EventCheck)

// Notifies says whether the event tells a member of other members (--role R --nodes …).
func (e Event) Notifies() bool {
	return e == EventAddNodes || e == EventDelNodes || e == EventRemoving
}

// AboutLeavers says whether a notification names members leaving or left, which a member is
// told of when it knows them, rather than members joining, which it is told of when not.
func (e Event) AboutLeavers() bool { return e == EventDelNodes || e == EventRemoving }

// Defaults applied when a role leaves a field out.
const (
	DefaultTimeout = 30 * time.Minute
	// DefaultHeartbeatTimeout is how long a running script may go unheard before its
	// member or agent is taken for lost; agents report at least every 2s.
	DefaultHeartbeatTimeout = 30 * time.Second
	// MinHeartbeatTimeout leaves room for a few missed reports.
	MinHeartbeatTimeout = 5 * time.Second
	DefaultCardinality  = "0+"
	// MaxScriptSize bounds one startscript; scripts travel inside workflow payloads.
	MaxScriptSize = 256 << 10
	// MaxTotalScriptSize bounds all distinct scripts of a cluster together, well under
	// Temporal's 2 MiB payload limit.
	MaxTotalScriptSize = 1 << 20
)

// Cluster is a validated spec, ready to be sent to the cluster workflow.
type Cluster struct {
	Name string `json:"name"`
	// Origin says where the spec came from (a file path), for people reading status.
	Origin string `json:"origin,omitempty"`
	Roles  []Role `json:"roles"`
	// Scripts holds each distinct startscript's content by its SHA-256, so roles sharing a
	// script ship it once.
	Scripts map[string]string `json:"scripts"`
	// ReconcileEvery is how often the members are compared with what the backend has;
	// zero takes DefaultReconcileEvery.
	ReconcileEvery time.Duration `json:"reconcileEvery,omitempty"`
	// Signature, when set, is a signature of the spec's manifest (internal/signing) by a
	// key that hosts started with --trusted-keys may trust. The workflow only carries it:
	// hosts check it.
	Signature *Signature `json:"signature,omitempty"`
}

// Signature is an ed25519 signature by the named key.
type Signature struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
	// NamespaceID and Generation are what the signer says the spec is for: the namespace
	// by its ID (unique across servers), and the generation the change it came with makes.
	// Both are signed (a signature from before them has neither).
	NamespaceID string `json:"namespaceId,omitempty"`
	Generation  int    `json:"generation,omitempty"`
	// Runtime says the signature covers how each role's members run too (Role.RuntimeHash):
	// their container, limits and probe. A signature from before it covers their script,
	// env and events alone.
	Runtime bool `json:"runtime,omitempty"`
	// SignedAt is when it was signed, by the signer's clock: a host keeps the newest it ran
	// of a cluster's name, across the cluster's deletion, and takes no spec signed before.
	SignedAt time.Time `json:"signedAt,omitzero"`
}

// Role is one validated role, with defaults filled in.
type Role struct {
	Name        string      `json:"name"`
	Members     int         `json:"members"`
	Cardinality Cardinality `json:"cardinality"`
	// Startscript is the path as written in the spec, for display.
	Startscript string `json:"startscript"`
	// ScriptHash keys the script's content in Cluster.Scripts.
	ScriptHash string            `json:"scriptHash"`
	Events     []Event           `json:"events"`
	Env        map[string]string `json:"env,omitempty"`
	Timeout    time.Duration     `json:"timeout"`
	// HeartbeatTimeout is zero in specs sent before it existed; the workflow then uses
	// DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
	MaxInFlight      int           `json:"maxInFlight,omitempty"`
	DependsOn        []string      `json:"dependsOn,omitempty"`
	// Health is how the role reacts to member-health events; zero fields take defaults.
	Health Health `json:"health"`
	// Placement says which hosts may hold the role's members.
	Placement Placement `json:"placement,omitzero"`
	// Update is how a new revision of the role rolls out to its members.
	Update Update `json:"update,omitzero"`
	// Actions are the named actions the role's script runs on demand (clusterflow run):
	// --action NAME --param k=v ....
	Actions []string `json:"actions,omitempty"`
	// ActionParams, by action, name the parameters it takes and the pattern each value
	// must match (RE2, the whole value); an action not in it takes any.
	ActionParams map[string]map[string]string `json:"actionParams,omitempty"`
	// Ports name the ports a member serves, e.g. {client: 2379, peer: 2380}: as written
	// where each member has a host to itself, else distinct ports the host assigns.
	Ports map[string]int `json:"ports,omitempty"`
	// Limits bound what the role's scripts take on a host; zero fields take the defaults.
	Limits Limits `json:"limits,omitzero"`
	// Probe is how often, and how strictly, the role's check event runs on each ready
	// member; zero fields take the defaults, and it applies only to a role listing check.
	Probe Probe `json:"probe,omitzero"`
	// Container is the role's image and how it runs, for a backend that gives each member
	// a container; embedded, so that its fields are the role's own in specs and histories.
	Container
}

// Limits bound what a member's scripts may take on its host, so that one cluster's fork
// bomb or flood of output leaves the others running. A zero field takes its default.
type Limits struct {
	// Processes bounds the processes and threads of the cluster's script user on the host
	// (RLIMIT_NPROC, counted across the cluster's members there).
	Processes int `json:"processes,omitempty"`
	// OpenFiles bounds each process's open files (RLIMIT_NOFILE).
	OpenFiles int `json:"openFiles,omitempty"`
	// OutputMiB is how much of each event's stdout and of its stderr a host keeps: past it
	// the file is rotated once, so a member keeps at most about twice this per stream.
	OutputMiB int `json:"outputMiB,omitempty"`
}

// DefaultLimits are a role's limits when it sets none: enough for a JVM or a database,
// not enough for a fork bomb to starve the host.
var DefaultLimits = Limits{Processes: 4096, OpenFiles: 65536, OutputMiB: 64}

// Bounds on what a role may set.
var (
	MinLimits = Limits{Processes: 16, OpenFiles: 64, OutputMiB: 1}
	MaxLimits = Limits{Processes: 1 << 20, OpenFiles: 1 << 20, OutputMiB: 4096}
)

// OrDefaults is the limits with each zero field its default.
func (l Limits) OrDefaults() Limits {
	if l.Processes == 0 {
		l.Processes = DefaultLimits.Processes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultLimits.OpenFiles
	}
	if l.OutputMiB == 0 {
		l.OutputMiB = DefaultLimits.OutputMiB
	}
	return l
}

// Bounds on a role's ports.
const MaxRolePorts = 8

var portName = regexp.MustCompile(`^[a-z][a-z0-9]{0,14}$`)

// PortEnv is the variable that gives a member its port of that name:
// CLUSTERFLOW_PORT_CLIENT for client.
func PortEnv(name string) string { return "CLUSTERFLOW_PORT_" + strings.ToUpper(name) }

// Wants reports whether the role's startscript subscribes to the event.
func (r Role) Wants(e Event) bool { return slices.Contains(r.Events, e) }

// Role returns the role with the given name.
func (c Cluster) Role(name string) (Role, bool) {
	for _, r := range c.Roles {
		if r.Name == name {
			return r, true
		}
	}
	return Role{}, false
}

// MemberName is the one place member names are formed: <cluster>-<role>-<ordinal>.
func MemberName(cluster, role string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", cluster, role, ordinal)
}

// ParseMemberName is MemberName's reverse: the role and ordinal of a name shaped like a
// member of the cluster, or false.
func ParseMemberName(cluster, name string) (role string, ordinal int, ok bool) {
	rest, ok := strings.CutPrefix(name, cluster+"-")
	if !ok {
		return "", 0, false
	}
	cut := strings.LastIndexByte(rest, '-')
	if cut <= 0 {
		return "", 0, false
	}
	role, digits := rest[:cut], rest[cut+1:]
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits || CheckName(role) != nil || CheckMemberName(name) != nil {
		return "", 0, false
	}
	return role, n, true
}

// RoleNames lists the roles in spec order.
func (c Cluster) RoleNames() []string {
	names := make([]string, len(c.Roles))
	for i, r := range c.Roles {
		names[i] = r.Name
	}
	return names
}

// TotalMembers counts the members the spec asks for.
func (c Cluster) TotalMembers() int {
	n := 0
	for _, r := range c.Roles {
		n += r.Members
	}
	return n
}
