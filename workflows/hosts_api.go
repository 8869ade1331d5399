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
	// Cordoned and Draining are the operator's marks, which a lost host keeps.
	Cordoned bool `json:"cordoned,omitempty"`
	Draining bool `json:"draining,omitempty"`
	Admission
}

// Document is the host as `clusterflow hosts -o json` prints it.
func (h Host) Document() HostDocument {
	return HostDocument{
		Name: h.Name, State: h.State(), Address: h.Address, Labels: h.Labels, Members: h.Members,
		LastSeen: h.LastSeen, Timeout: h.Timeout.String(), BootID: h.BootID,
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

// Schedulable reports whether the host may get new members.
func (h Host) Schedulable() bool { return h.State() == HostReady }

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
