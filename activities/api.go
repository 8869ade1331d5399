// Package activities holds every side effect clusterflow's workflows cause, as methods on
// Activities, which carries the member backend they act through.
package activities

import (
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
)

// Activity input and result types. They are the backend's own types: the activities add
// Temporal concerns (heartbeats, error classification) and nothing else.
type (
	MemberRef    = backend.Member
	ClusterFiles = backend.ClusterFiles
	ScriptRun    = backend.ScriptRun
	ScriptStop   = backend.ScriptStop
	ScriptResult = backend.ScriptResult
	LogRequest   = backend.LogRequest
	LogChunk     = backend.LogChunk
)

// Error types of failed startscripts. All are non-retryable: running a failing script
// again rarely helps, and a user wants to see the failure now.
const (
	ErrScriptFailed   = agent.ErrScriptFailed
	ErrScriptTimedOut = agent.ErrScriptTimedOut
	// ErrSecretUnavailable: a secret reference of the role's env could not be filled in on
	// the member's host, so nothing ran.
	ErrSecretUnavailable = "SecretUnavailable"
)

// HostInfo is what a host's worker says about its host.
type HostInfo struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Timeout is how long the host may go unheard of before it is lost.
	Timeout time.Duration `json:"timeout"`
	BootID  string        `json:"bootID,omitempty"`
}

// MemberListing is what a backend has of a cluster's members, by role and ordinal ranges,
// so that a listing of thousands of members stays a few kilobytes. Truncated says the
// backend had more folders shaped like members than a cluster can have, and the listing
// stopped there: it cannot tell a member gone from one not listed.
type MemberListing struct {
	Roles     []RoleListing `json:"roles"`
	Truncated bool          `json:"truncated,omitempty"`
}

// RoleListing is the members of one role a backend has.
type RoleListing struct {
	Role     string         `json:"role"`
	Ordinals []notice.Range `json:"ordinals"`
}

// ClusterSandboxes is a cluster's files on one host: its members' sandboxes, the first
// SandboxNames of them by name, and how many more.
type ClusterSandboxes struct {
	Cluster     string   `json:"cluster"`
	Members     []string `json:"members"`
	MoreMembers int      `json:"moreMembers,omitempty"`
}

// Bounds of a host's listing of its clusters, which is one payload: the members it names of
// each cluster, and the clusters it lists.
const (
	SandboxNames   = 20
	ListedClusters = 1000
)
