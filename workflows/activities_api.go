package workflows

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
)

// ActivityContract is what the workflows ask of a worker's activities: their names,
// inputs and results. A worker registers activities.Activities, which implements it (the
// worker checks so when it compiles); the workflows name each activity by its method here,
// and never import the implementation.
type ActivityContract interface {
	CheckInHost(ctx context.Context) (HostRegistration, error)
	HoldHostLease(ctx context.Context, timeout time.Duration) error
	WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error
	CreateMember(ctx context.Context, m backend.MemberRef) error
	RemoveMember(ctx context.Context, m backend.MemberRef) error
	ListMembers(ctx context.Context, clusterKey string) ([]backend.MemberRef, error)
	ListMemberOrdinals(ctx context.Context, clusterKey string) (MemberListing, error)
	RemoveCluster(ctx context.Context, clusterKey string) error
	RunStartscript(ctx context.Context, run backend.ScriptRun) (backend.ScriptResult, error)
	StopScript(ctx context.Context, stop backend.ScriptStop) error
	ReadMemberLog(ctx context.Context, req backend.LogRequest) (backend.LogChunk, error)
	ListHostClusters(ctx context.Context) ([]HostCluster, error)
	SignalAll(ctx context.Context, b Broadcast) (int, error)
}

// The activities' names, as the SDK names a registered method: checked by the compiler
// against the contract, so a renamed method cannot leave a workflow asking for an
// activity no worker has.
var (
	actCheckInHost        = activityName(ActivityContract.CheckInHost)
	actHoldHostLease      = activityName(ActivityContract.HoldHostLease)
	actWriteClusterFiles  = activityName(ActivityContract.WriteClusterFiles)
	actCreateMember       = activityName(ActivityContract.CreateMember)
	actRemoveMember       = activityName(ActivityContract.RemoveMember)
	actListMembers        = activityName(ActivityContract.ListMembers)
	actListMemberOrdinals = activityName(ActivityContract.ListMemberOrdinals)
	actRemoveCluster      = activityName(ActivityContract.RemoveCluster)
	actRunStartscript     = activityName(ActivityContract.RunStartscript)
	actStopScript         = activityName(ActivityContract.StopScript)
	actReadMemberLog      = activityName(ActivityContract.ReadMemberLog)
	actListHostClusters   = activityName(ActivityContract.ListHostClusters)
	actSignalAll          = activityName(ActivityContract.SignalAll)
)

// activityName is a method expression's method name.
func activityName(method any) string {
	full := runtime.FuncForPC(reflect.ValueOf(method).Pointer()).Name()
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}

// HostRegistration is what a worker says about its host when it starts, and again at each
// check-in.
type HostRegistration struct {
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

// HostCluster is a cluster a host holds something of: its members there, the first
// ListedMemberNames of them by name, and how many more.
type HostCluster struct {
	Cluster string `json:"cluster"`
	// Home sets the cluster's folder apart from others of its name (backend.ClusterRef).
	Home        string   `json:"home,omitempty"`
	Members     []string `json:"members"`
	MoreMembers int      `json:"moreMembers,omitempty"`
	// Elsewhere says another server or namespace owns it: not this one's to remove.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// Key is the cluster's key, which RemoveCluster takes.
func (c HostCluster) Key() string { return backend.ClusterRef{Name: c.Cluster, Home: c.Home}.Key() }

// Bounds of a host's listing of its clusters, which is one payload: the members it names of
// each cluster, and the clusters it lists.
const (
	ListedMemberNames = 20
	ListedClusters    = 1000
)

// Broadcast is a signal to send to every running workflow of one type, and to a few
// workflows by ID.
type Broadcast struct {
	WorkflowType string   `json:"workflowType"`
	Also         []string `json:"also,omitempty"`
	Signal       string   `json:"signal"`
	Arg          any      `json:"arg"`
}

// LeaseBeat is how often a host's lease heartbeats: a tenth of its timeout. The lease's
// heartbeat timeout is the host timeout and one beat more, so that a host is lost between
// one and 1.1 host timeouts after it was last heard of, never sooner.
func LeaseBeat(timeout time.Duration) time.Duration {
	return max(timeout/10, 100*time.Millisecond)
}
