package workflows

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// The host registry's contract. One entity workflow, HostsWorkflowID, keeps every host:
// its labels and address, its liveness (a lease activity that heartbeats on the host's own
// task queue) and the operator's marks (cordoned, draining). It pushes the view of all
// hosts to every cluster that placed members through it.
const (
	HostsWorkflowName = "HostsWorkflow"
	HostsWorkflowID   = "clusterflow-hosts"

	// HostsQuery returns []Host, sorted by name.
	HostsQuery = "hosts"
	// RegisterHostUpdate takes a HostRegistration from a starting worker and returns its
	// Host.
	RegisterHostUpdate = "register-host"
	// CordonHostUpdate takes a HostMark and returns the Host.
	CordonHostUpdate = "cordon-host"
	// ForgetHostUpdate takes a host name; it refuses a host that still holds members.
	ForgetHostUpdate = "forget-host"
	// DrainHostUpdate takes a host name: every cluster replaces its members there by ones
	// on other hosts. Uncordoning the host ends the drain.
	DrainHostUpdate = "drain-host"
	// ClusterHostsSignal tells the registry how many members a cluster has on each host
	// (ClusterPlacement); it also subscribes the cluster to HostsChangedSignal.
	ClusterHostsSignal = "cluster-hosts"
	// HostsChangedSignal gives a cluster the registry's current []Host.
	HostsChangedSignal = "hosts-changed"

	// DefaultHostTimeout is how long a host may go unheard of before it is lost.
	DefaultHostTimeout = 30 * time.Second
	// LocalHost names the one host of single-host mode, whose members use the shared
	// task queue.
	LocalHost = "local"
)

// HostMark sets or clears an operator's cordon.
type HostMark struct {
	Host   string `json:"host"`
	Cordon bool   `json:"cordon"`
}

// ClusterPlacement is how many members a cluster has on each host.
type ClusterPlacement struct {
	Cluster string         `json:"cluster"`
	Members map[string]int `json:"members"`
	// Gone unsubscribes a deleted cluster.
	Gone bool `json:"gone,omitempty"`
}

// HostWorkerIdentity marks the workers of hosts among a task queue's pollers: their
// identity ends with it and the host's name, so that a client can tell a fleet from
// single-host mode before any host has registered.
const HostWorkerIdentity = "@clusterflow-host:"

// HostTaskQueue is the task queue of one host's worker: member activities for the host's
// members go there.
func HostTaskQueue(sharedQueue, host string) string { return sharedQueue + "@" + host }

// HostsInput carries the registry across continue-as-new.
type HostsInput struct {
	Hosts    []Host             `json:"hosts,omitempty"`
	Clusters []ClusterPlacement `json:"clusters,omitempty"`
	// Maintenance refuses drains while it is on.
	Maintenance Maintenance `json:"maintenance,omitzero"`
	// Shard is the number of a shard's workflow (HostShardWorkflowName).
	Shard int `json:"shard,omitempty"`
	// Shards and Subscribers are the sharded registry's directory.
	Shards      []int             `json:"shards,omitempty"`
	Subscribers []ShardSubscriber `json:"subscribers,omitempty"`
}

// A fleet past a few hundred hosts does not fit one workflow: each host holds a lease
// activity, and Temporal refuses a workflow more than 2,000 pending activities. The
// registry is therefore split into shards, HostShards of them, each a workflow of its own
// (HostShardWorkflowID) keeping the hosts whose names hash to it (HostShard): their
// leases, marks and members, as the single registry kept them all. Hosts register with
// their shard directly, and operators cordon, drain and forget through it. The registry's
// own workflow (HostsWorkflowID) is left the directory: which shards run, which clusters
// follow the hosts, maintenance. It forwards each cluster's placement, split by shard, to
// the shards, and each shard tells the clusters of its own hosts (HostShardViewSignal),
// so a change of one host sends one shard's hosts, not the fleet's.
const (
	HostShardWorkflowName = "HostShardWorkflow"
	// HostShards is how many shards the fleet is split into. A shard holds at most
	// MaxHostsPerShard hosts, so the fleet at most 64,000.
	HostShards = 64
	// MaxHostsPerShard keeps a shard's pending activities (a lease a host) at half
	// Temporal's limit.
	MaxHostsPerShard = 1000

	// RegistryQuery returns the RegistryInfo of the registry's workflow.
	RegistryQuery = "registry"
	// ShardStartedSignal tells the registry a shard (its number) has started: the shard
	// is told which clusters follow the hosts, and is listed from then on.
	ShardStartedSignal = "shard-started"
	// ShardRegistrySignal asks a registry that keeps every host itself, as before shards,
	// to move its hosts into shards (a worker of a version with shards sends it).
	ShardRegistrySignal = "shard-registry"
	// ShardSetupSignal gives a shard that just started the clusters following the hosts
	// and the maintenance in force (ShardSetup).
	ShardSetupSignal = "shard-setup"
	// HostShardViewSignal gives a cluster a shard's hosts (HostShardView): they replace
	// every host of that shard in its view.
	HostShardViewSignal = "hosts-shard-changed"
)

// RegistryInfo says whether the registry is sharded, and which shards run.
type RegistryInfo struct {
	Sharded bool  `json:"sharded"`
	Shards  []int `json:"shards,omitempty"`
}

// ShardSetup is what a new shard learns from the registry: the clusters following the
// hosts, and the maintenance in force (none: the shard keeps what it has).
type ShardSetup struct {
	Clusters    []string     `json:"clusters,omitempty"`
	Maintenance *Maintenance `json:"maintenance,omitempty"`
}

// HostShardView is one shard's hosts, sorted by name.
type HostShardView struct {
	Shard int    `json:"shard"`
	Hosts []Host `json:"hosts,omitempty"`
}

// HostShard is the shard a host belongs to: a stable hash (FNV-1a) of its name.
func HostShard(host string) int {
	h := fnv.New32a()
	h.Write([]byte(host))
	return int(h.Sum32() % HostShards)
}

// HostShardWorkflowID is the workflow ID of a registry shard.
func HostShardWorkflowID(shard int) string { return fmt.Sprintf("%s-%02d", HostsWorkflowID, shard) }

// ShardSubscriber is a cluster that follows the hosts, and the shards that hold its
// members (forwarded each placement, so that they count members right).
type ShardSubscriber struct {
	Cluster string `json:"cluster"`
	Shards  []int  `json:"shards,omitempty"`
}

// HostsListingWorkflowName lists a cluster's members on a group of its hosts for a
// reconcile, as a child of the cluster: an activity a host, so that a cluster on thousands
// of hosts keeps those activities' events out of its own history (change.ListingInChildren).
const HostsListingWorkflowName = "HostsListingWorkflow"

// HostsPerChild is the most hosts one listing or writing child runs on.
const HostsPerChild = 500

// HostsLostSignal tells a listing or writing child the hosts of its group that the
// cluster's view took for lost meanwhile ([]string): it stops waiting on them.
const HostsLostSignal = "hosts-lost"

// HostsListingInput names the cluster's folder and the hosts to list it on, each with how
// long its worker may take to answer.
type HostsListingInput struct {
	Cluster   string        `json:"cluster"`
	FolderKey string        `json:"folderKey"`
	Hosts     []ListingHost `json:"hosts"`
}

// ListingHost is a host a listing runs on.
type ListingHost struct {
	Name string        `json:"name"`
	Wait time.Duration `json:"wait"`
}

// HostsListing is what a listing found, host by host, sorted by name: the members there, or
// why the host could not be listed.
type HostsListing struct {
	Hosts []HostListing `json:"hosts"`
}

// HostListing is one host's part of a HostsListing.
type HostListing struct {
	Host    string        `json:"host"`
	Members MemberListing `json:"members,omitzero"`
	Error   string        `json:"error,omitempty"`
}

// HostsWritingWorkflowName writes a cluster's files on a group of its hosts, as a child of
// the cluster: an activity a host, so that a cluster on thousands of hosts keeps those
// activities' events out of its own history (change.WritingInChildren).
const HostsWritingWorkflowName = "HostsWritingWorkflow"

// HostsWritingInput is what a writing child writes: Files on every host, and besides, on
// the hosts marked Install, the startscripts, envs and signed specs they lack. They travel
// once, not once a host.
type HostsWritingInput struct {
	Cluster string               `json:"cluster"`
	Files   backend.ClusterFiles `json:"files"`
	// Install holds only Scripts, Envs and Signed.
	Install backend.ClusterFiles `json:"install,omitzero"`
	Hosts   []WritingHost        `json:"hosts"`
}

// WritingHost is a host a writing child writes to.
type WritingHost struct {
	Name    string        `json:"name"`
	Wait    time.Duration `json:"wait"`
	Install bool          `json:"install,omitempty"`
}

// HostsWriting says on which hosts of its group a writing child could not write, and why;
// it wrote on the others.
type HostsWriting struct {
	Failed []HostFailure `json:"failed,omitempty"`
}

// HostFailure is why something could not be done on a host.
type HostFailure struct {
	Host  string `json:"host"`
	Error string `json:"error"`
}
