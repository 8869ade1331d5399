// Package agent is the member-side agent: one long-lived process per host that runs
// startscripts on behalf of workers, heartbeats their progress to Temporal and completes
// their activities itself. It keeps a small record of every run on disk, so a restarted
// agent re-adopts live runs and delivers results it had not delivered yet, and a relaunch
// of a run it already has attaches to it instead of running the script twice.
//
// The agent knows Temporal only as a client that heartbeats and completes activities.
package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// Connection is how the agent reaches Temporal: the SDK's client profile, as the worker
// that launched the run resolved it, and the worker's codec keys, if it has any, so that
// what the agent reports is encrypted as the worker's payloads are. A worker sends what its
// files hold, never their paths (Inline): the agent, often root, reads no file a caller
// names.
type Connection struct {
	envconfig.ClientConfigProfile
	// CodecKeys is the codec key file's content.
	CodecKeys string `json:"codecKeys,omitempty"`
	// CodecKeyFile names the key file in connections an agent of before Inline stored; no
	// caller may send it.
	CodecKeyFile string `json:"codecKeyFile,omitempty"`
}

// Key identifies a run across activity attempts: a retried activity keeps its workflow ID
// and activity ID, so its relaunch finds the run the first attempt started.
type Key struct {
	WorkflowID string `json:"workflowId"`
	ActivityID string `json:"activityId"`
}

// ID names the run's record folder.
func (k Key) ID() string {
	sum := sha256.Sum256([]byte(k.WorkflowID + "\x00" + k.ActivityID))
	return hex.EncodeToString(sum[:10])
}

// Protocol is the version of what the worker and the agent say to each other. A worker
// finding an agent of an older protocol (left running by the version it was upgraded from)
// replaces it: the runs it looks after carry on, and the new agent adopts them. Protocol 4
// moved the host's backend into the agent: a worker calls it rather than touching members'
// folders itself.
// Protocol 5 added probes (Launch.Probe), which an older agent would drop unseen.
// Protocol 6 sends a connection's certificates and codec keys rather than their paths
// (Connection.Inline), which an older agent would drop unseen and then report unencrypted.
const Protocol = 6

// Launch asks the agent to run a startscript, or to attach to the run it already has. It
// names what to run, never where: the agent derives every path from the cluster, member,
// event and script hash (see layout), under the data folder it serves.
type Launch struct {
	Protocol  int    `json:"protocol"`
	Key       Key    `json:"key"`
	TaskToken []byte `json:"taskToken"`
	// Connection is kept apart from the run record, readable by the agent's user only.
	Connection Connection `json:"connection"`
	Cluster    string     `json:"cluster"`
	// Home sets the cluster's folder apart from others of its name (layout.Cluster).
	Home   string `json:"home,omitempty"`
	Member string `json:"member"`
	Event  string `json:"event"`
	Script Script `json:"script"`
	// Timeout bounds the script; Grace is its time between SIGTERM and SIGKILL when stopped.
	Timeout time.Duration `json:"timeout"`
	Grace   time.Duration `json:"grace"`
	// HeartbeatTimeout is the activity's; zero (a worker from before it was sent) makes the
	// agent report every HeartbeatEvery.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
	// Probe, when set, is how to check the member once this run succeeds; a launch without
	// one stops the member's checks (see probe.go).
	Probe *Probe `json:"probe,omitempty"`
}

// Probe is how the agent checks a member (backend.ScriptRun.Probe).
type Probe struct {
	spec.Probe
	// Script is the check: the member's startscript with --check, run as its scripts are.
	Script Script `json:"script"`
	// Host is the member's host as its cluster knows it (empty in single-host mode).
	Host string `json:"host,omitempty"`
}

// Stop asks the agent to stop, at once, the runs of a member's event that a workflow
// started: their activity was cancelled, and a quiet script would hear of it only at its
// next heartbeat, a third of its heartbeat timeout later. Each stopped run reports its
// cancellation.
type Stop struct {
	WorkflowID string `json:"workflowId"`
	Member     string `json:"member"`
	Event      string `json:"event"`
}

// request is what the agent's socket takes: a Launch, a Stop, or a Call of its backend.
type request struct {
	Launch
	Stop *Stop `json:"stop,omitempty"`
	Call *Call `json:"call,omitempty"`
}

// Call asks the host's backend, which the agent holds, to do one thing of the backend seam
// (backend.Backend) for a worker: the worker keeps no member's folder itself, so it needs no
// privilege over them (see RemoteBackend).
type Call struct {
	Method string `json:"method"`
	// Worker says who asks: what the backend marks its own, tells scripts, and completes
	// their activities with.
	Worker Worker          `json:"worker"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// Worker is what a worker tells its host's backend of itself with each call.
type Worker struct {
	// Owner is the ID of the Temporal namespace the worker serves (unique across servers),
	// and Namespace its name: folders are marked with the one, secret folders named by the
	// other.
	Owner     string `json:"owner,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Host and Address are the host the worker serves and the address it registered; both
	// empty in single-host mode.
	Host    string `json:"host,omitempty"`
	Address string `json:"address,omitempty"`
	// Connection is how the agent completes the activities of the scripts it runs.
	Connection Connection `json:"connection"`
	// SecretEnv holds, for a launch, the worker's variables that the run's cluster may name
	// in {fromEnv: N} (spec.SecretEnvName): never any other cluster's.
	SecretEnv map[string]string `json:"secretEnv,omitempty"`
}

// Script is what to run: the cluster's startscript of this content hash, which the agent
// checks before it runs anything, with these arguments and environment.
type Script struct {
	SHA256 string   `json:"sha256"`
	Args   []string `json:"args,omitempty"`
	Env    []string `json:"env,omitempty"`
	// User, when set, is who the script runs as (the agent then runs as root).
	User *runner.User `json:"user,omitempty"`
	// Limits bound the script and all it starts.
	Limits runner.Limits `json:"limits,omitzero"`
	// Resources bound the member's cgroup, all of its processes together.
	Resources runner.Resources `json:"resources,omitzero"`
	// Enter, when set, runs the script inside the member's container rather than on the
	// host (the docker backend).
	Enter *Enter `json:"enter,omitempty"`
}

// Enter names the container a script runs in, and the engine holding it. The agent then
// starts Options.EnterCommand in the script's place, as the agent's own user, which execs
// the script in the container through the engine, writes its output to the run's files
// and exits with its status (and stops it when stopped itself): the run is watched,
// stopped, timed out and adopted by a restarted agent as any other.
type Enter struct {
	Engine    string `json:"engine"`
	Container string `json:"container"`
	// User is who the script runs as in the container (uid:gid; empty: the image's user).
	User string `json:"user,omitempty"`
}

// Reply says what the agent did with a launch.
type Reply struct {
	// Protocol is the agent's (zero from an agent of before protocols).
	Protocol int `json:"protocol,omitempty"`
	// Action is started, attached (the run was already going) or delivering (the run had
	// finished; its stored result is being delivered).
	Action string `json:"action,omitempty"`
	Error  string `json:"error,omitempty"`
	// Fault, with Error, is a backend's error of a known kind (backend.Fault), which the
	// caller rebuilds.
	Fault *backend.Fault `json:"fault,omitempty"`
	// Result is a call's answer, as JSON.
	Result json.RawMessage `json:"result,omitempty"`
	// Settings is a digest of the arguments the agent was started with: a worker that
	// starts agents itself replaces one started with others (see Client.Command).
	Settings string `json:"settings,omitempty"`
	// Refused says the agent will not run the launch as asked, and asking again changes
	// nothing (a script that is not what its hash says).
	Refused bool `json:"refused,omitempty"`
}

// RefusedError is a launch the agent will not run, whoever asks again.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

const (
	ActionStarted    = "started"
	ActionAttached   = "attached"
	ActionDelivering = "delivering"
)

// Progress is what the agent heartbeats while a script runs (backend.Progress).
type Progress = backend.Progress

// Error types the agent fails activities with. A failed or timed-out script is not retried;
// a lost run (its process vanished without an exit status) is, because only then is
// running the script again the right thing.
const (
	ErrScriptFailed   = "ScriptFailed"
	ErrScriptTimedOut = "ScriptTimedOut"
	ErrScriptLost     = "ScriptLost"
)

// Status is what an agent says of itself: its release (clusterflow version) and protocol,
// for the host's registration, and what it looks after now, for its workers' metrics: the
// scripts running and the members it checks, the whole host's, whichever worker launched
// them (numbers only: no caller learns whose).
type Status struct {
	Version  string `json:"version"`
	Protocol int    `json:"protocol"`
	Running  int    `json:"running"`
	Probes   int    `json:"probes"`
}
