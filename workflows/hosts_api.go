package workflows

import (
	"time"
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
}
