package cluster

import (
	"crypto/rand"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/announce"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// Workflow is the entity workflow of one cluster, with ID cluster/<name>. It holds
// the desired spec and every member's observed state, converges the members to the spec
// whenever it changes (deploy, resize, apply), and lives until the cluster is deleted,
// continuing as new between operations to keep its history small.
func Workflow(ctx workflow.Context, in workflows.ClusterInput) (workflows.ClusterStatus, error) {
	w, err := newClusterWorkflow(ctx, in)
	if err != nil {
		return workflows.ClusterStatus{}, err
	}
	if err := w.setup(ctx); err != nil {
		return workflows.ClusterStatus{}, err
	}
	return w.run(ctx)
}

// defaultContinueAsNewEvery bounds a run's operations even when Temporal does not yet
// suggest continuing as new; reconcilesPerRun bounds its periodic reconciles (about 10
// events each) the same way.
const (
	defaultContinueAsNewEvery = 50
	reconcilesPerRun          = 300
)

// updates takes the changes to the desired state that operators ask for (updates, their
// validators, the queries of what a change would do): it validates them, records them and
// wakes the run loop.
type updates struct{ w *clusterWorkflow }

// executor converges the members to the desired generation, one pass at a time.
type executor struct{ w *clusterWorkflow }

// clusterWorkflow is the cluster's entity workflow: its handlers, its run loop and the
// executor of the planner's passes, over the cluster it keeps.
type clusterWorkflow struct {
	cluster
	// cancelOperation stops the operation in progress, for a cancel or a delete.
	cancelOperation workflow.CancelFunc
	// filesLock keeps configmeta writes in order: the operation and an update that grows a
	// role midway both write it.
	filesLock workflow.Mutex
	// writings counts this run's writes in children, which name them.
	writings int
	// runner runs role operations as child workflows.
	runner *role.Runner
	// health is member health.
	health *health.Machine
	// updates take changes to the desired state; exec converges the members to it.
	updates *updates
	exec    *executor
	// hostOptions and announceOptions are what following the hosts and announcing take
	// of this run.
	hostOptions     hosts.Options
	announceOptions announce.Options
}

func newClusterWorkflow(ctx workflow.Context, in workflows.ClusterInput) (*clusterWorkflow, error) {
	w := &clusterWorkflow{
		cluster:   cluster{spec: in.Spec, continueAsNewEvery: in.ContinueAsNewEvery, logger: workflow.GetLogger(ctx)},
		filesLock: workflow.NewMutex(ctx),
	}
	w.runner = role.NewRunner(false)
	w.health = health.NewMachine(w.runner)
	w.updates, w.exec = &updates{w}, &executor{w}
	if w.continueAsNewEvery <= 0 {
		w.continueAsNewEvery = defaultContinueAsNewEvery
	}
	// Asked before the first placement, which the start of a deploy makes.
	if workflow.GetVersion(ctx, change.HostAllowLists, workflow.DefaultVersion, 1) >= 1 {
		w.hostCheck = plan.HostCheck{On: true, Namespace: workflow.GetInfo(ctx).Namespace}
	}
	w.lifecycle = workflow.GetVersion(ctx, change.Lifecycle, workflow.DefaultVersion, 1) >= 1
	w.appContract = w.lifecycle && workflow.GetVersion(ctx, change.AppContract, workflow.DefaultVersion, 1) >= 1
	w.bootstrap = w.appContract && workflow.GetVersion(ctx, change.Bootstrap, workflow.DefaultVersion, 1) >= 1
	carried, err := in.ReadCarried()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("cannot read the state carried over: "+err.Error(), "InvalidInput", nil)
	}
	if carried != nil {
		w.state, w.removed, w.retiring, w.deleteRequested = carried.State, carried.Removed, carried.Retiring, carried.Deleting
		rollout.Init(&w.state, w.spec, w.state.CreatedAt)
		makeFolderKey(ctx, &w.state)
		return w, nil
	}
	levels, err := spec.Levels(in.Spec.Roles)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid spec: "+err.Error(), "InvalidSpec", nil)
	}
	if problems := spec.CheckLimits(in.Spec); len(problems) > 0 {
		// The CLI and the starter refuse such a spec; a raw SDK call may still send one.
		return nil, temporal.NewNonRetryableApplicationError("invalid spec: "+describeProblems(problems), "InvalidSpec", nil)
	}
	now := workflow.Now(ctx)
	w.state = workflows.ClusterState{
		Name: in.Spec.Name, Phase: workflows.PhaseDeploying, Origin: in.Spec.Origin,
		Levels: levels, CreatedAt: now, UpdatedAt: now, Generation: 1, SpecGeneration: 1,
	}
	if workflow.GetVersion(ctx, change.SandboxHomes, workflow.DefaultVersion, 1) >= 1 {
		w.state.Home = backend.HomeOf(workflow.GetInfo(ctx).WorkflowExecution.RunID)
	}
	makeFolderKey(ctx, &w.state)
	w.noteSignature()
	if len(in.HostsGzip) > 0 {
		if err := gzjson.Unmarshal(in.HostsGzip, &in.Hosts); err != nil {
			return nil, temporal.NewNonRetryableApplicationError("invalid hosts: "+err.Error(), "InvalidInput", nil)
		}
	}
	if len(in.Hosts) > 0 {
		w.state.OnHosts, w.state.Hosts = true, plan.SortHosts(in.Hosts)
	}
	for _, r := range in.Spec.Roles {
		w.state.Roles = append(w.state.Roles, plan.RoleState{Name: r.Name, Level: plan.LevelOf(levels, r.Name), DependsOn: r.DependsOn, Desired: r.Members})
	}
	w.exec.addPendingMembers(workflow.Now(ctx))
	rollout.Init(&w.state, w.spec, now)
	return w, nil
}

// makeFolderKey gives a cluster with none its folder key, once (change.FolderKeys).
func makeFolderKey(ctx workflow.Context, s *workflows.ClusterState) {
	if s.FolderKey != "" || workflow.GetVersion(ctx, change.FolderKeys, workflow.DefaultVersion, 1) < 1 {
		return
	}
	// Random, so made once and recorded: a replay reads it back.
	_ = workflow.SideEffect(ctx, func(workflow.Context) any { return rand.Text() }).Get(&s.FolderKey)
}

func (w *clusterWorkflow) setup(ctx workflow.Context) error {
	w.bounded = workflow.GetVersion(ctx, change.BoundedPayloads, workflow.DefaultVersion, 1) >= 1
	w.runner.Bounded = w.bounded
	w.signedGenerations = w.bounded && workflow.GetVersion(ctx, change.SignedGenerations, workflow.DefaultVersion, 1) >= 1
	if w.signedGenerations && w.state.SpecGeneration == 0 {
		w.state.SpecGeneration = w.state.Generation // a cluster of before: its spec is at least this new
	}
	w.setUpElsewhere = workflow.GetVersion(ctx, change.SetUpElsewhere, workflow.DefaultVersion, 1) >= 1
	w.configMetaByQuery = w.bounded && workflow.GetVersion(ctx, change.ConfigMetaByQuery, workflow.DefaultVersion, 1) >= 1
	w.health.Options = health.Options{Bounded: w.bounded, SetUpElsewhere: w.setUpElsewhere, AppContract: w.appContract, HostCheck: w.hostCheck, HostsAtOnce: w.hostsAtOnce()}
	w.hostOptions = hosts.Options{SetUpElsewhere: w.setUpElsewhere, HostCheck: w.hostCheck}
	w.announceOptions = announce.Options{Bounded: w.bounded, Lifecycle: w.lifecycle, AppContract: w.appContract}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.StatusQuery, func(page *workflows.StatusPage) (workflows.ClusterStatus, error) {
		status := w.state.Status(page, workflows.QueryStatusBytes)
		status.Rollout, status.Revisions, status.Actions = rollout.Status(&w.state, w.spec), rollout.List(&w.state), w.state.Actions
		for i := range status.Roles {
			if r, ok := w.spec.Role(status.Roles[i].Name); ok {
				status.Roles[i].Placement = r.Placement
			}
		}
		return status, nil
	}, workflow.QueryHandlerOptions{Description: "The cluster's phase, roles and members, as `clusterflow status -o json` prints them; with {from, limit}, only that page of members"}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.ConfigMetaQuery, w.configMetas.Query,
		workflow.QueryHandlerOptions{Description: "The configmeta of {hash}, gzipped, which the cluster is writing to its hosts"}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.ManifestQuery, func(req workflows.ResizeRequest) (signing.Manifest, error) {
		next := resized(w.spec, req)
		// The signer adds the namespace's ID, which it knows and the workflow does not.
		next.Signature = &spec.Signature{Generation: w.state.Generation + 1, Runtime: true}
		return signing.ManifestOf(next, workflow.GetInfo(ctx).Namespace), nil
	}, workflow.QueryHandlerOptions{Description: "The manifest a signature of the spec covers, as a resize to {counts} would make it"}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.PreviewQuery, func(req workflows.PreviewRequest) (workflows.Preview, error) {
		return w.updates.preview(req), nil
	}, workflow.QueryHandlerOptions{Description: "What an apply of {spec} or a resize to {counts} would do, changing nothing (the dry run)"}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.SpecQuery, func() (workflows.DesiredSpec, error) {
		hash, err := workflows.SpecHash(w.spec)
		return workflows.DesiredSpec{Spec: w.spec, Hash: hash}, err
	}, workflow.QueryHandlerOptions{Description: "The desired spec and its hash, to edit and apply again with {ifSpec}: the hash"}); err != nil {
		return err
	}
	if err := w.updates.setUpdateHandlers(ctx); err != nil {
		return err
	}
	// The children's follower tells the role children running now of a change: members no
	// longer wanted stop, and those added to a role being configured join its child
	// (change.ChildrenOutsideHandlers); the runs of members set up elsewhere stop
	// (change.StopsOutsideHandlers). The updates and events that make changes only wake it.
	workflow.Go(ctx, func(ctx workflow.Context) {
		for workflow.Await(ctx, func() bool { return w.childrenDue }) == nil {
			w.childrenDue = false
			w.runner.StopUnwanted(ctx, w, w.spec)
			w.exec.grow(ctx)
			moved := w.movedRuns
			w.movedRuns = nil
			for _, r := range moved {
				w.runner.StopInOperation(ctx, r.role, map[string]bool{r.member: true}, r.hostLost)
			}
		}
	})
	progress := workflow.GetSignalChannel(ctx, workflows.RoleProgressSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p workflows.RoleProgress
			progress.Receive(ctx, &p)
			w.runner.ApplyProgress(ctx, w, p)
		}
	})
	w.health.ReceiveEvents(ctx, w)
	w.receiveMaintenance(ctx)
	if err := w.updates.setTransferHandlers(ctx); err != nil {
		return err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		workflows.ClusterNameKey.ValueSet(w.state.Name), workflows.ClusterPhaseKey.ValueSet(string(w.state.ShownPhase()))); err != nil {
		return err
	}
	if w.state.OnHosts && workflow.GetVersion(ctx, change.Hosts, workflow.DefaultVersion, 1) >= 1 {
		hosts.Watch(ctx, w, w.hostOptions)
	}
	// Runs recorded before member health had no health timer.
	if workflow.GetVersion(ctx, change.MemberHealth, workflow.DefaultVersion, 1) >= 1 {
		workflow.Go(ctx, func(ctx workflow.Context) { w.health.Watch(ctx, w) })
	}
	return nil
}

// run converges the cluster each time its desired generation moves on, until a delete.
func (w *clusterWorkflow) run(ctx workflow.Context) (workflows.ClusterStatus, error) {
	for {
		err := workflow.Await(ctx, func() bool {
			return w.deleteRequested || w.retireRequested || w.operationDue() || w.continueAsNewDue(ctx)
		})
		if err != nil {
			// The workflow itself was cancelled (say from the Web UI): leave nothing behind.
			w.logger.Info("Cluster workflow cancelled; deleting the cluster")
			break
		}
		// A run whose history has grown starts afresh before its next operation, or a
		// delete, so that no run holds more than one large operation (one on 20,000
		// members adds about 15 MB): runs from before bounded payloads went on.
		if w.bounded && w.continueAsNewDue(ctx) && (w.deleteRequested || w.operationDue()) {
			return workflows.ClusterStatus{}, w.continueAsNew(ctx)
		}
		if w.deleteRequested {
			break
		}
		if w.retireRequested {
			return w.retire(ctx)
		}
		if w.operationDue() {
			w.operate(ctx)
			continue
		}
		return workflows.ClusterStatus{}, w.continueAsNew(ctx)
	}
	w.exec.delete(ctx)
	if ctx.Err() != nil {
		return w.snapshot(), ctx.Err()
	}
	// Let the delete update that got us here return before the workflow closes.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return w.snapshot(), nil
}

// operate runs one operation, converging to the desired generation, on a context a cancel
// or a delete can stop.
func (w *clusterWorkflow) operate(ctx workflow.Context) {
	opCtx, cancel := workflow.WithCancel(ctx)
	w.cancelOperation, w.operating = cancel, true
	w.exec.converge(opCtx)
	w.cancelOperation, w.operating = nil, false
	w.operationsThisRun++
	hosts.Drain(ctx, w)
	if w.cancelRequested && !w.deleteRequested {
		w.cancelRequested = false
		if ro := w.state.Rollout; rollout.Running(&w.state) && ro.Paused == "" {
			ro.Paused, ro.PausedAt = "canceled by an operator", workflow.Now(ctx) // `rollout resume` goes on with it
		}
		w.SetPhase(ctx, workflows.PhaseCanceled, canceledMessage(&w.state))
	}
}

// continueAsNewDue says the history has grown enough to start afresh, which happens only
// between operations.
func (w *clusterWorkflow) continueAsNewDue(ctx workflow.Context) bool {
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested() || w.operationsThisRun >= w.continueAsNewEvery || w.health.Reconciles() >= reconcilesPerRun
}

// continueAsNew hands the whole state to a fresh run once no update handler is midway.
func (w *clusterWorkflow) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	w.logger.Info("Continuing as new", "Operations", w.state.Operations, "Generation", w.state.Generation)
	next := workflows.ClusterInput{Spec: w.spec, ContinueAsNewEvery: w.continueAsNewEvery}
	if err := next.Carry(workflows.Carried{State: w.state, Removed: w.removed, Retiring: w.retiring, Deleting: w.deleteRequested}); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, workflows.ClusterWorkflowName, next)
}

// RunPass runs a pass through the executor, whose passes alone start role children: for
// the concepts that run work in a pass (a rollout's batch).
func (w *clusterWorkflow) RunPass(ctx workflow.Context, pass plan.Pass) {
	w.exec.runPass(ctx, &w.spec, pass, nil)
}
