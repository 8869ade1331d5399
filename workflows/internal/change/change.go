// Package change names the changes to live workflow logic: each is asked with
// workflow.GetVersion so that histories recorded before it replay as they ran. The names are
// markers in recorded histories, so they never change.
package change

const (
	// LaunchCreatesSandbox: the configure launch creates the member's sandbox itself,
	// one activity per member instead of two (CreateMember, then RunStartscript).
	LaunchCreatesSandbox = "launch-creates-sandbox"
	// StoppableMembers: each configure runs on its own cancellable context, so a
	// resize can stop members no longer wanted while the others carry on.
	StoppableMembers = "stoppable-members"
	// MemberHealth: the cluster keeps a health timer for member timers and
	// periodic reconciles.
	MemberHealth = "member-health"
	// Hosts: a cluster deployed on hosts reports its placement to the host registry
	// and takes the registry's views of the hosts.
	Hosts = "hosts"
	// RoleBatches: a role operation on more than roleBatchSize members runs as
	// batches, a child workflow each.
	RoleBatches = "role-batches"
	// CheapPlacementReports: the placement report to the host registry waits for a
	// change of the state rather than recounting members every time a coroutine yields.
	CheapPlacementReports = "cheap-placement-reports"
	// ReconcileSetUpBefore: reconcile judges only members set up before its listing.
	ReconcileSetUpBefore = "reconcile-set-up-before"
	// FreshLeaseOnRegister: a known host that registers again (its worker restarted)
	// gets a fresh lease at once, instead of being taken for lost when the dead worker's
	// lease breaks.
	FreshLeaseOnRegister = "fresh-lease-on-register"
	// PromptFailureReports: a role child reports its first failed configure to the
	// cluster at once, rather than with its next coalesced progress report, so that the
	// role's other batches halt before they start more members.
	PromptFailureReports = "prompt-failure-reports"
	// ReconcileSkipsActive: reconcile does not judge members an operation in
	// progress acts on; a shrink's teardown removed their sandboxes before the cluster
	// heard of it, and reconcile took them for gone.
	ReconcileSkipsActive = "reconcile-skips-active"
	// BoundedPayloads: nothing a cluster sends grows with members × members or
	// members × env. Notifications name a notice each host holds instead of listing nodes
	// per member, envs travel once per host by hash, scripts and envs go only to hosts that
	// lack them, children start a bounded number per workflow task, and a running batch
	// takes no more members than a batch holds. Asked once per run, when it starts: a run
	// that began before keeps the old ways to its end.
	BoundedPayloads = "bounded-payloads"
	// SetUpElsewhere: a member being set up (pending, creating or configuring) whose
	// host is lost, or that is reported gone, is placed afresh and set up elsewhere; its run
	// on the lost host is stopped and its outcome ignored, and its sandbox there is removed
	// once the host is back. Files are written to the hosts at once, and a host lost
	// meanwhile is not waited for. Asked once per run, when it starts.
	SetUpElsewhere = "set-up-elsewhere"
	// StopScriptsAtOnce: a role child whose member's run is cancelled asks the
	// member's host to stop the script at once, rather than waiting for its agent's next
	// heartbeat (up to a third of the heartbeat timeout: 10 s by default).
	StopScriptsAtOnce = "stop-scripts-at-once"
	// HostAllowLists: placement passes over hosts whose allow-lists (worker
	// --allow-clusters, --allow-namespaces, --allow-env-override) refuse the cluster, its
	// namespace or a role's env. Asked once per run, when it starts.
	HostAllowLists = "host-allow-lists"
	// SandboxHomes: a cluster deployed since has a home, from its first run's ID,
	// and keeps its files on hosts in <data>/clusters/NAME@HOME: apart from a cluster of
	// the same name of another server or namespace sharing the folder, and from an
	// earlier one of its own. Asked when a cluster is deployed; a cluster deployed before
	// keeps <data>/clusters/NAME for good.
	SandboxHomes = "sandbox-homes"
	// Rollouts: an apply that changes what a role's members run rolls the new
	// revision out to them (upgrade batches, watches, the health gate). Asked when a pass
	// first has members to move; runs from before never had any.
	Rollouts = "rollouts"
	// Lifecycle: the lifecycle contract real apps rely on. A member in config_error
	// whose configure ran (failed, cancelled, or set up and then failing a notification or
	// an action) is torn down when it is removed (before, only a failed configure, upgrade
	// or restart was); a role never gives a removed member's ordinal to a new member; and
	// survivors hear addnodes of the members that joined before delnodes of those that
	// left, as the user guide says. Asked once per run, when it starts; role children ask it
	// when they tear down.
	Lifecycle = "lifecycle-contract"
	// AppContract: what real apps (a Redis Cluster) need of the contract beyond
	// Lifecycle. Before a graceful removal's decommission the survivors subscribed to
	// removing are told of the members about to leave; a failed removing holds them, and
	// retry runs it again; and a replacement's predecessor stays in configmeta, as leaving,
	// until it is gone. Asked once per run, when it starts.
	AppContract = "app-contract"
	// Bootstrap: the first member added to a role none of whose members was set up (or a
	// replacement of it) is marked to form the app's cluster, CLUSTERFLOW_BOOTSTRAP on its
	// configure and bootstrap in configmeta, so that one member forms and the others join.
	// Asked once per run, when it starts.
	Bootstrap = "bootstrap-member"
	// WatchOnlyReports: a down or unhealthy report from a reporter that may not cause
	// a replacement (a gateway token without the replace scope) takes the member down with
	// no replaceAfter timer: only a report that may replace, or an operator, replaces it.
	WatchOnlyReports = "watch-only-reports"
	// FolderKeys: a cluster has a folder key, a secret made once (a side effect) and
	// carried with its state, continue-as-new, export and import alike; every write of its
	// files presents it, and a host hands a folder owned by another namespace over only to
	// a write that presents the key the folder was marked with. Asked once per run, when it
	// starts, of a cluster with no key yet.
	FolderKeys = "folder-keys"
	// SignedGenerations: the cluster's files always carry the manifest of its current
	// spec, signed or not, with the generation that made it, so that a host trusting keys
	// sets members up only under the newest spec, and only when it was signed. Asked once
	// per run, when it starts.
	SignedGenerations = "signed-generations"
	// FilesBeforeStart: the start pass of restarted hosts first writes the cluster's
	// files there, scripts included: a host may have lost them, and an imported cluster's
	// folders become its own (their key presented) before its first start runs there.
	FilesBeforeStart = "files-before-start"
	// ChildrenOutsideHandlers: a resize or an apply tells the role children running now of
	// the change (members no longer wanted stop, members added to a role being configured
	// join its child) through a coroutine of the workflow that the update wakes, rather
	// than from the update's handler, which now only validates, records the change and
	// wakes. Asked by each resize and apply.
	ChildrenOutsideHandlers = "children-outside-handlers"
	// StopsOutsideHandlers: a member set up elsewhere (its host lost while it was being set
	// up, or gone) has its run on the old host stopped by the children's follower, which the
	// health event wakes, rather than from where the event is taken (an update's handler
	// among them). Asked by each such move.
	StopsOutsideHandlers = "stops-outside-handlers"
	// ShardedRegistry: the host registry's workflow keeps a directory of shards, each
	// a workflow keeping the hosts that hash to it, instead of every host itself. Asked
	// once per run, when it starts: a registry that kept every host moves its hosts into
	// shards when it continues as new, which a worker with shards asks of it.
	ShardedRegistry = "sharded-registry"
	// ConfigMetaByQuery: a cluster on hosts writes its configmeta to each host as a
	// reference (its hash), which the host fetches with the ConfigMetaQuery, rather than
	// whole in every write: a member a host made every pass's writes O(members x hosts) in
	// the history. A cluster-wide activity (files, listing, removal) runs on at most 500
	// hosts at once. Asked once per run, when it starts.
	ConfigMetaByQuery = "configmeta-by-query"
	// ListingInChildren: a reconcile of a cluster on more than listingInline hosts lists
	// them in child workflows (HostsListingWorkflowName) of up to 500 hosts each, rather
	// than an activity a host in the cluster's own history: a cluster of a member on each
	// of 2,000 hosts added 6,000 events a minute, and reached 31,893 mid-deploy. Asked by
	// each such reconcile.
	ListingInChildren = "listing-in-children"
	// WritingInChildren: a write of a cluster's files (configmeta, notices) to more than
	// hosts.InChildren hosts runs in child workflows (HostsWritingWorkflowName) of up to
	// 500 hosts each, rather than an activity a host in the cluster's own history: a
	// cluster of a member on each of 2,000 hosts took 6,000 events a write, two writes a
	// pass, and its workflow tasks outgrew their timeout on the history of a few passes.
	// Asked by each such write.
	WritingInChildren = "writing-in-children"
	// HostActivityHeartbeats: a cluster-wide activity on a host (files, listing, removal)
	// has a heartbeat timeout of 15 s, rather than only the host's wait (5 minutes by
	// default) or a child's minute to finish: a task that an overloaded server handed to
	// a poll whose answer never reached the host stays started and run nowhere, and held
	// a write of 2,000 hosts a minute, or a cluster's own write the host's wait. Asked by
	// each such activity.
	HostActivityHeartbeats = "host-activity-heartbeats"
	// SparseLeaseBeats: a host's lease heartbeats every quarter of the host timeout, not
	// every tenth, and its heartbeat timeout is 1.25 host timeouts rather than 1.1: each
	// heartbeat is a write of the shard's whole mutable state, and at a beat a tenth of
	// the timeout an idle fleet of 3,000 hosts kept the embedded server half a core busy.
	// The host takes its beat from the lease's heartbeat timeout, so leases of either kind
	// are kept right. Asked by each lease.
	SparseLeaseBeats = "sparse-lease-beats"
	// RecheckDown: a member of a role listing check taken down by anything but its own
	// check (an operator, an alert, a failed start) has its host count its checks afresh
	// (RecheckMember), so that probe.successes passing checks in a row bring it up: a host
	// reports only changes of its check's result, and one that kept passing never reported
	// the member up. Asked by each such step.
	RecheckDown = "recheck-down"
	// BoundedRechecks: a run asks at most health.RechecksAtOnce rechecks at once; a member
	// taken down past the bound is not rechecked. A burst of downs on a large role asked
	// one activity per member at once, past the 2,000 pending activities Temporal allows.
	// Asked by a recheck at the bound.
	BoundedRechecks = "bounded-rechecks"
	// RemoveNamed: a resize may name the members to take away (ResizeRequest.Remove),
	// which are marked leaving as it is accepted, so that the shrink takes them rather than
	// the highest ordinals. Asked by a resize that names any.
	RemoveNamed = "remove-named"
)
