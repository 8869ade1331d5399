// Package backend is where members live: the local backend keeps each member in a sandbox
// folder; others (containers, machines) can come later behind the same interface. Backends
// know nothing of Temporal.
package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
)

// Backend is a substrate for members, as BOSH's CPI is for VMs: it provisions them and runs
// their startscripts. A backend knows nothing of Temporal; the activities add heartbeats
// and error classes. The local backend (internal/backend/local) keeps each member in a
// sandbox folder of its host; another (containers, pods) gives each member its own address
// and runs scripts by exec inside it.
type Backend interface {
	Provisioner
	ScriptRunner
}

// Provisioner makes, lists and removes members, and installs the files they read.
type Provisioner interface {
	// WriteClusterFiles installs the cluster's startscripts, envs, configmeta, notices and
	// signed manifests where its members on this host read them.
	WriteClusterFiles(ctx context.Context, files ClusterFiles) error
	// CreateMember makes the member. It is idempotent.
	CreateMember(ctx context.Context, m MemberRef) error
	// RemoveMember stops whatever the member left running and deletes it. It is
	// idempotent. A cluster another server or namespace owns is refused with an
	// *OwnedElsewhereError.
	RemoveMember(ctx context.Context, m MemberRef) error
	// RemoveCluster deletes what is left of the cluster once its members are gone. key is
	// the cluster's key (ClusterRef.Key): its name, or NAME@HOME.
	RemoveCluster(ctx context.Context, key string) error
	// ListMembers lists the members the backend has for the cluster of that key, whoever
	// made them.
	ListMembers(ctx context.Context, key string) ([]MemberRef, error)
	// ListClusters lists every cluster the backend holds anything of, by key, saying of
	// each whether another server or namespace owns it.
	ListClusters(ctx context.Context) ([]HeldCluster, error)
	// SignedSpecs are the signed manifests the cluster's files brought, newest first, for
	// a host that runs only what trusted keys signed.
	SignedSpecs(ctx context.Context, c ClusterRef) ([]signing.Signed, error)
	// SignedMark is the newest signing time of a spec a trusted key signed that the host
	// took for a cluster of this name, in the calling worker's namespace, whatever its home
	// (ClusterFiles.SignedMark): kept past the cluster's deletion, so that a spec signed
	// before it does not come back with a new cluster of the name. Zero: none yet.
	SignedMark(ctx context.Context, name string) (time.Time, error)
	// MemberAddress is how the cluster's other members reach this member, given the
	// address of the host it was placed on: the host's own for the local backend, the
	// member's for a backend that gives each member one (a container's name on a shared
	// network, say). It is derived, not discovered, so that the backend writing configmeta
	// on any host gives every member's.
	MemberAddress(m MemberRef, hostAddress string) string
	// AssignPorts gives each member asked for a distinct free port for each name, kept
	// for the member's life (asked again, it answers the same) and freed when the member
	// is removed; no two members of any cluster on the host share one.
	AssignPorts(ctx context.Context, req PortRequest) (PortAssignment, error)
}

// PortRequest asks a host for ports for members of one cluster.
type PortRequest struct {
	Cluster ClusterRef `json:"cluster"`
	Members []PortAsk  `json:"members"`
}

// PortAsk names a member and the names of the ports it needs.
type PortAsk struct {
	Member string   `json:"member"`
	Names  []string `json:"names"`
}

// PortAssignment maps each member to its ports by name.
type PortAssignment map[string]map[string]int

// ScriptRunner runs a member's startscripts and keeps their output.
type ScriptRunner interface {
	// LaunchScript hands the member's startscript run for one event to whatever runs
	// scripts for the member and returns once it has been taken. A configure creates the
	// member first (as CreateMember, idempotently). The run's result goes
	// to the completion, not to the caller. A run the backend will not run, whoever asks
	// again, is refused with a *RefusedError; a secret it cannot fill in, a *SecretError.
	LaunchScript(ctx context.Context, run ScriptRun, to Completion) error
	// StopScript stops, at once, the member's run of an event that a workflow started and
	// then cancelled, rather than when the run next reports: the run then reports the
	// cancellation. It is idempotent, and stops nothing that has ended.
	StopScript(ctx context.Context, stop ScriptStop) error
	// ReadLog reads part of a member's script output for one event.
	ReadLog(ctx context.Context, req LogRequest) (LogChunk, error)
}

// HeldCluster is a cluster a backend holds something of.
type HeldCluster struct {
	ClusterRef
	// Elsewhere says another server or namespace owns it: not this one's to remove.
	Elsewhere bool
}

// MemberRef names one member on a backend: what a backend knows of it, as against the
// workflows' record of its state (plan.Member).
type MemberRef struct {
	Cluster string `json:"cluster"`
	// Home sets the cluster's folder apart from others of the same name (layout.Cluster);
	// empty for a cluster deployed before homes.
	Home string `json:"home,omitempty"`
	Role string `json:"role"`
	Name string `json:"name"`
	// Host is the host a listing found the member on; the workflow sets it, backends
	// ignore it.
	Host string `json:"host,omitempty"`
}

// ClusterFiles are the files the members of a cluster on one host read: the startscripts
// and each role's env (both by hash, sent to a host once), configmeta, and the notices that
// addnodes and delnodes runs name. Each part is optional but the cluster.
type ClusterFiles struct {
	Cluster string `json:"cluster"`
	// Home is the cluster's (see MemberRef.Home).
	Home string `json:"home,omitempty"`
	// Scripts maps SHA-256 to content; already installed scripts may be left out.
	Scripts map[string]string `json:"scripts,omitempty"`
	// Envs maps EnvHash to a role's env; a script run names the one it gets.
	Envs map[string]map[string]string `json:"envs,omitempty"`
	// ConfigMeta is written when its Cluster is set (or it comes gzipped).
	ConfigMeta ConfigMeta `json:"configMeta"`
	// ConfigMetaGzip, when set, is ConfigMeta as gzipped JSON: a cluster of thousands of
	// members lists them all, which would pass Temporal's payload limit.
	ConfigMetaGzip []byte `json:"configMetaGzip,omitempty"`
	// ConfigMetaFrom, when set, says where the host fetches the configmeta (gzipped), which
	// the activity puts in ConfigMetaGzip before the backend writes it.
	ConfigMetaFrom *ConfigMetaSource `json:"configMetaFrom,omitempty"`
	// Notice is a membership change that addnodes or delnodes runs will tell.
	Notice *notice.Notice `json:"notice,omitempty"`
	// Signed maps Signed.Hash to the spec's manifest and signature, for a host that
	// trusts keys to check runs against.
	Signed map[string]signing.Signed `json:"signed,omitempty"`
	// FolderKey is the cluster's secret its folder is marked with: a folder another
	// namespace owns is handed over only to a write that presents it (an import's).
	FolderKey string `json:"folderKey,omitempty"`
	// SignedMark, set by a host that trusts keys, is the newest signing time of the signed
	// manifests this write brings that a trusted key signed: the host keeps the newest it
	// took of the cluster's name (SignedMark).
	SignedMark time.Time `json:"signedMark,omitzero"`
}

// Folder is the member's cluster.
func (m MemberRef) Folder() ClusterRef { return ClusterRef{Name: m.Cluster, Home: m.Home} }

// Folder is the files' cluster.
func (f ClusterFiles) Folder() ClusterRef { return ClusterRef{Name: f.Cluster, Home: f.Home} }

// ConfigMetaSource is where a host fetches the configmeta to write: the cluster's workflow
// answers the ConfigMetaQuery with the configmeta of that hash.
type ConfigMetaSource struct {
	WorkflowID string `json:"workflowID"`
	Hash       string `json:"hash"`
}

// HasConfigMeta says the files carry configmeta to write.
func (f ClusterFiles) HasConfigMeta() bool {
	return f.ConfigMeta.Cluster != "" || len(f.ConfigMetaGzip) > 0 || f.ConfigMetaFrom != nil
}

// Unpack fills ConfigMeta from ConfigMetaGzip when the files came packed, and checks what a
// host must not take on trust: the content of every script and env against its hash.
func (f *ClusterFiles) Unpack() error {
	for hash, content := range f.Scripts {
		if spec.ContentHash([]byte(content)) != hash {
			return fmt.Errorf("startscript %s: its content does not match its hash", hash)
		}
	}
	for hash, env := range f.Envs {
		if spec.EnvHash(env) != hash {
			return fmt.Errorf("env %s: its content does not match its hash", hash)
		}
	}
	for hash, s := range f.Signed {
		if s.Hash() != hash {
			return fmt.Errorf("signed manifest %s: its content does not match its hash", hash)
		}
	}
	if f.Notice != nil {
		if err := f.Notice.Check(); err != nil {
			return err
		}
		if f.Notice.Cluster != f.Cluster {
			return fmt.Errorf("notice %d is for cluster %q, not %q", f.Notice.ID, f.Notice.Cluster, f.Cluster)
		}
	}
	if len(f.ConfigMetaGzip) == 0 {
		return nil
	}
	f.ConfigMeta = ConfigMeta{}
	if err := gzjson.Unmarshal(f.ConfigMetaGzip, &f.ConfigMeta); err != nil {
		return fmt.Errorf("unpack configmeta: %w", err)
	}
	f.ConfigMetaGzip = nil
	return nil
}

// ScriptRun is one startscript run for one member and event. It names what the host
// already has rather than carrying it: the script and the role's env by hash, and for
// addnodes and delnodes the notice, from which the host works out the member's nodes. Runs
// sent before that carried the env (Env) and the nodes (Nodes) themselves.
type ScriptRun struct {
	Member     MemberRef  `json:"member"`
	Event      spec.Event `json:"event"`
	ScriptHash string     `json:"scriptHash"`
	// EnvHash names the role's env among the cluster's files; "" for none.
	EnvHash string            `json:"envHash,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout time.Duration     `json:"timeout"`
	// Notice names the membership change an addnodes or delnodes tells, and Knows is what
	// the member knows, which decides the nodes it is told of.
	Notice int               `json:"notice,omitempty"`
	Knows  *notice.Knowledge `json:"knows,omitempty"`
	// NodesRole and Nodes say which members were added or removed (addnodes, delnodes); a
	// run with a Notice has its nodes filled in by the host.
	NodesRole string   `json:"nodesRole,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
	// Revision is the cluster revision whose script and env the run uses (0 from runs
	// before revisions), and FromRevision, for upgrade, the one the member ran before.
	Revision     int `json:"revision,omitempty"`
	FromRevision int `json:"fromRevision,omitempty"`
	// Action names the role's action a run is for (its Event is the action's name), with
	// its parameters, each k=v.
	Action string   `json:"action,omitempty"`
	Params []string `json:"params,omitempty"`
	// Reason, for a teardown, is why the member leaves: delete, shrink, replace, drain or
	// orphan (a sandbox reconcile found that the cluster never knew).
	Reason string `json:"reason,omitempty"`
	// Joining, for a configure, says the member joins a role that already had members set
	// up (a grow or a replacement), and Replaces names the member it replaces.
	Joining  bool   `json:"joining,omitempty"`
	Replaces string `json:"replaces,omitempty"`
	// Bootstrap, for a configure, says the member forms the app's cluster: no member of its
	// role was set up when it was added, and it is the one of those that forms it.
	Bootstrap bool `json:"bootstrap,omitempty"`
	// Ports are the member's ports by name (CLUSTERFLOW_PORT_<NAME>).
	Ports map[string]int `json:"ports,omitempty"`
	// Limits are the role's; zero fields take the defaults (spec.DefaultLimits).
	Limits spec.Limits `json:"limits,omitzero"`
	// Probe, for a role that lists check, is its probe with defaults: once the run succeeds
	// the member's host checks it that way, until a run without one (a teardown, a
	// decommission) or the member's removal. A run of an event that sets up (spec.Event.SetsUp)
	// with Probe.ReadyAfter succeeds only once a check passes.
	Probe *spec.Probe `json:"probe,omitempty"`
	// Container is the role's image and how it runs, for a backend that runs each member
	// in a container (a configure creates it); nil for a role that sets none, which a
	// container backend refuses, as the local backend refuses one that sets any.
	Container *spec.Container `json:"container,omitempty"`
}

// ScriptStop names runs to stop: the member's runs of an event for one workflow.
type ScriptStop struct {
	Member     MemberRef  `json:"member"`
	Event      spec.Event `json:"event"`
	WorkflowID string     `json:"workflowId"`
}

// ScriptResult is how a run ended, with the tails of its output.
type ScriptResult struct {
	Outcome    Outcome       `json:"outcome"`
	ExitCode   int           `json:"exitCode"`
	Duration   time.Duration `json:"duration"`
	StdoutTail string        `json:"stdoutTail"`
	StderrTail string        `json:"stderrTail"`
	// Detail says why a run that is NotReady is not.
	Detail string `json:"detail,omitempty"`
}

// Outcome says how a run ended.
type Outcome string

const (
	Exited   Outcome = "exited"
	TimedOut Outcome = "timed_out"
	Canceled Outcome = "canceled"
	NotReady Outcome = "not_ready"
)

// Error types a script run's activity fails with: a script that exited non-zero, and one
// that outlived its timeout. Neither is retried: running a failing script again rarely
// helps, and a user wants to see the failure now.
const (
	ErrScriptFailed   = "ScriptFailed"
	ErrScriptTimedOut = "ScriptTimedOut"
	// ErrSecretUnavailable: a secret reference of the role's env could not be filled in on
	// the member's host; ErrHostRefused: the host does not run this cluster, namespace or
	// env. Either way nothing ran.
	ErrSecretUnavailable = "SecretUnavailable"
	ErrHostRefused       = "HostRefused"
	// ErrNoSandbox: the member has no sandbox on the host (NoSandboxError); nothing ran.
	ErrNoSandbox = "NoSandbox"
)

// Completion says where a script run's result must go: the Temporal activity waiting for
// it, which whatever runs the script completes (the local backend's agent does, through
// the connection it was built with). Backends pass it through untouched.
type Completion struct {
	// WorkflowID and ActivityID name the run across activity attempts: a retried
	// activity keeps both, so its relaunch finds the run the first attempt started.
	WorkflowID string `json:"workflowId"`
	ActivityID string `json:"activityId"`
	TaskToken  []byte `json:"taskToken"`
	// HeartbeatTimeout is the activity's: the run must be reported within it.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
}

// LaunchWatcher is a backend whose launches can take a while before the script runs (a
// container backend pulling the member's image): LaunchProgress says what a launch of the
// member is doing now, for its activity's heartbeat and so for status; "" when nothing.
type LaunchWatcher interface {
	LaunchProgress(ctx context.Context, m MemberRef) (string, error)
}

// Rechecker is a backend whose host checks its members (a role listing check):
// RecheckMember has it take the member for down and count its checks afresh, so that
// probe.successes passing checks in a row report it up. A host reports only changes of a
// check's result: a member the cluster took for down from elsewhere (an operator, an
// alert) while its check kept passing would never be reported up.
type Rechecker interface {
	RecheckMember(ctx context.Context, m MemberRef) error
}

// Progress is what a script run heartbeats while it runs; the Web UI shows it as the
// pending activity's heartbeat details, and the client's progress reports read it.
type Progress struct {
	Member   string `json:"member"`
	Event    string `json:"event"`
	Elapsed  string `json:"elapsed"`
	LastLine string `json:"lastLine,omitempty"`
}

// AgentReporter is a backend whose scripts an agent of its own runs: AgentVersion says
// which release that agent is (clusterflow version), which the host registers beside its
// worker's, since the two are upgraded apart.
type AgentReporter interface {
	AgentVersion(ctx context.Context) (string, error)
}

// Describer is a backend that can say where a member lives and what its host ran for it
// (status --member).
type Describer interface {
	DescribeMember(ctx context.Context, m MemberRef) (MemberDescription, error)
}

// MemberDescription is a member as its host knows it.
type MemberDescription struct {
	// Dir is the member's sandbox on its host; Address, how its cluster's members reach it
	// (as configmeta says). Missing says the host holds no such member (removed, or never
	// made); its runs are gone with it.
	Dir     string `json:"dir,omitempty"`
	Address string `json:"address,omitempty"`
	Missing bool   `json:"missing,omitempty"`
	// Runs are the host's records of the member's script runs, oldest first: the latest
	// MaxDescribedRuns of them.
	Runs []RunSummary `json:"runs,omitempty"`
}

// MaxDescribedRuns bounds the runs a MemberDescription lists: an activity result, which a
// member of many actions and restarts must not take past Temporal's limits.
const MaxDescribedRuns = 50

// RunSummary is one run of a member's script, as its host recorded it.
type RunSummary struct {
	Event   string    `json:"event"`
	Started time.Time `json:"started"`
	// Outcome is running, or how the run ended: exited, timed_out, canceled, not_ready, or
	// lost (its process vanished without an exit status, and it ran again).
	Outcome string `json:"outcome"`
	// ExitCode and Duration are set once the run ended; Failure is the one line a failed
	// run's activity failed with (its exit status and its last line of output).
	ExitCode int           `json:"exitCode,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Failure  string        `json:"failure,omitempty"`
}
