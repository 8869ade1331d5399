package workflows

import "github.com/clusterflow/clusterflow/workflows/plan"

// The member model lives with the planner (workflows/plan), which has no SDK; these names
// are the workflows' contract with clients and role children, as before.
type (
	Member           = plan.Member
	MemberState      = plan.MemberState
	MemberHealth     = plan.MemberHealth
	HealthTransition = plan.HealthTransition
	HealthEvent      = plan.HealthEvent
	NodeGroup        = plan.NodeGroup
	NoticeRef        = plan.NoticeRef
	RoleOperation    = plan.RoleOperation
	HostRegistration = plan.HostRegistration
	Admission        = plan.Admission
	Host             = plan.Host
	HostState        = plan.HostState
	HostDocument     = plan.HostDocument
)

const (
	MemberPending     = plan.MemberPending
	MemberCreating    = plan.MemberCreating
	MemberConfiguring = plan.MemberConfiguring
	MemberReady       = plan.MemberReady
	MemberConfigError = plan.MemberConfigError
	MemberDeleting    = plan.MemberDeleting
	MemberDeleted     = plan.MemberDeleted
	MemberDown        = plan.MemberDown
	MemberFlapping    = plan.MemberFlapping
	MemberReplacing   = plan.MemberReplacing
	MemberRogue       = plan.MemberRogue

	HealthDown        = plan.HealthDown
	HealthUp          = plan.HealthUp
	HealthGone        = plan.HealthGone
	HealthUnhealthy   = plan.HealthUnhealthy
	HealthTimeout     = plan.HealthTimeout
	HealthResume      = plan.HealthResume
	HealthConfigError = plan.HealthConfigError
	HealthDrain       = plan.HealthDrain
	HealthLost        = plan.HealthLost

	OpConfigure = plan.OpConfigure
	OpTeardown  = plan.OpTeardown
	OpAddNodes  = plan.OpAddNodes
	OpDelNodes  = plan.OpDelNodes
	OpStart     = plan.OpStart
	OpUpgrade   = plan.OpUpgrade
	OpRestart   = plan.OpRestart
	OpAction    = plan.OpAction

	OpDecommission = plan.OpDecommission
	OpRemoving     = plan.OpRemoving

	DecommissionDone   = plan.DecommissionDone
	DecommissionFailed = plan.DecommissionFailed

	HostReady    = plan.HostReady
	HostCordoned = plan.HostCordoned
	HostDraining = plan.HostDraining
	HostLost     = plan.HostLost
)

// CountReady counts the ready members.
func CountReady(members []Member) int { return plan.CountReady(members) }
