package workflows

import (
	"context"
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
	DescribeMember(ctx context.Context, m backend.MemberRef) (backend.MemberDescription, error)
	ListHostClusters(ctx context.Context) ([]HostCluster, error)
	SignalAll(ctx context.Context, b Broadcast) (int, error)
	AssignPorts(ctx context.Context, req backend.PortRequest) (backend.PortAssignment, error)
	RecheckMember(ctx context.Context, m backend.MemberRef) error
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

// LeaseBeat is how often a host's lease heartbeats: a quarter of its timeout. The lease's
// heartbeat timeout is the host timeout and one beat more, so that a host is lost between
// one and 1.25 host timeouts after it was last heard of, never sooner. (Leases scheduled
// before change "sparse-lease-beats" beat every tenth, LegacyLeaseBeat.) A host reads its
// beat from the lease's heartbeat timeout, LeaseBeatOf.
func LeaseBeat(timeout time.Duration) time.Duration {
	return max(timeout/4, 100*time.Millisecond)
}

// LegacyLeaseBeat is the beat of leases scheduled before change "sparse-lease-beats".
func LegacyLeaseBeat(timeout time.Duration) time.Duration {
	return max(timeout/10, 100*time.Millisecond)
}

// LeaseBeatOf is the beat of a lease of the host timeout whose heartbeat timeout is
// heartbeatTimeout: the difference, or the legacy beat when the lease gives none.
func LeaseBeatOf(timeout, heartbeatTimeout time.Duration) time.Duration {
	if beat := heartbeatTimeout - timeout; beat > 0 {
		return beat
	}
	return LegacyLeaseBeat(timeout)
}
