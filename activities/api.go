// Package activities holds every side effect clusterflow's workflows cause, as methods on
// Activities, which carries the member backend they act through.
package activities

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
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
	// ErrHostRefused: the host does not run this cluster, namespace or env (its Admission),
	// whatever placed the member there; nothing ran.
	ErrHostRefused = "HostRefused"
)

// HostInfo is what a host's worker says about its host.
type HostInfo struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Timeout is how long the host may go unheard of before it is lost.
	Timeout time.Duration `json:"timeout"`
	BootID  string        `json:"bootID,omitempty"`
	// Admission is what the host lets run, which placement respects and the host enforces.
	Admission
}

// Admission is what a host lets run: the clusters and namespaces it serves, and whether a
// spec may set loader variables. Empty lists allow everything.
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
	Cluster string `json:"cluster"`
	// Home sets the cluster's folder apart from others of its name (layout.Cluster).
	Home        string   `json:"home,omitempty"`
	Members     []string `json:"members"`
	MoreMembers int      `json:"moreMembers,omitempty"`
	// Elsewhere says another server or namespace owns the folder: not this one's to remove.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// Key is the cluster's folder key, which RemoveCluster takes.
func (c ClusterSandboxes) Key() string { return layout.Cluster{Name: c.Cluster, Home: c.Home}.Key() }

// Bounds of a host's listing of its clusters, which is one payload: the members it names of
// each cluster, and the clusters it lists.
const (
	SandboxNames   = 20
	ListedClusters = 1000
)
