// Package backend is where members live: the local backend keeps each member in a sandbox
// folder; others (containers, machines) can come later behind the same interface. Backends
// know nothing of Temporal.
package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/layout"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/internal/spec"
)

// Backend creates, runs scripts in, and removes members.
type Backend interface {
	// WriteClusterFiles installs the cluster's startscripts and its configmeta.
	WriteClusterFiles(ctx context.Context, files ClusterFiles) error
	// CreateMember makes the member's sandbox. It is idempotent.
	CreateMember(ctx context.Context, m Member) error
	// LaunchScript hands the member's startscript run for one event to whatever runs
	// scripts for the member (for the local backend, the host's agent) and returns once it
	// has been taken. The run's result goes to the completion, not to the caller.
	LaunchScript(ctx context.Context, run ScriptRun, to Completion) error
	// StopScript stops, at once, the member's run of an event that a workflow started and
	// then cancelled, rather than when the run next reports: the run then reports the
	// cancellation. It is idempotent, and stops nothing that has ended.
	StopScript(ctx context.Context, stop ScriptStop) error
	// RemoveMember stops whatever the member left running and deletes its sandbox. It is
	// idempotent.
	RemoveMember(ctx context.Context, m Member) error
	// RemoveCluster deletes what is left of the cluster once its members are gone. key is
	// the cluster's folder key (layout.Cluster.Key): its name, or NAME@HOME.
	RemoveCluster(ctx context.Context, key string) error
	// ListMembers lists the members the backend has for the cluster of that key, whoever
	// made them.
	ListMembers(ctx context.Context, key string) ([]Member, error)
}

// Member names one member.
type Member struct {
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
	// Home is the cluster's (see Member.Home).
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
	// Notice is a membership change that addnodes or delnodes runs will tell.
	Notice *notice.Notice `json:"notice,omitempty"`
	// Signed maps Signed.Hash to the spec's manifest and signature, for a host that
	// trusts keys to check runs against.
	Signed map[string]signing.Signed `json:"signed,omitempty"`
}

// Folder is the member's cluster's folder.
func (m Member) Folder() layout.Cluster { return layout.Cluster{Name: m.Cluster, Home: m.Home} }

// Folder is the cluster's folder.
func (f ClusterFiles) Folder() layout.Cluster { return layout.Cluster{Name: f.Cluster, Home: f.Home} }

// HasConfigMeta says the files carry configmeta to write.
func (f ClusterFiles) HasConfigMeta() bool {
	return f.ConfigMeta.Cluster != "" || len(f.ConfigMetaGzip) > 0
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
	Member     Member     `json:"member"`
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
}

// ScriptStop names runs to stop: the member's runs of an event for one workflow.
type ScriptStop struct {
	Member     Member     `json:"member"`
	Event      spec.Event `json:"event"`
	WorkflowID string     `json:"workflowId"`
}

// ScriptResult is how a run ended, with the tails of its output.
type ScriptResult = runner.Result

// Completion says where a script run's result must go: the Temporal activity waiting for
// it. Backends pass it through untouched.
type Completion struct {
	Key        agent.Key        `json:"key"`
	TaskToken  []byte           `json:"taskToken"`
	Connection agent.Connection `json:"connection"`
	// HeartbeatTimeout is the activity's: the agent must report within it.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
}
