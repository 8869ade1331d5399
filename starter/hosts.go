package starter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

const registrySummary = "clusterflow host registry"

// entity is one of the fleet's singleton workflows, which the first update starts.
type entity struct {
	id, workflowName string
	input            any
	summary          string
}

// updateWithStart runs an update on the entity's workflow, starting it if it is not running.
func (s *Starter) updateWithStart(ctx context.Context, e entity, update string, arg, result any) error {
	start := s.client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       e.id,
		TaskQueue:                s.taskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            e.summary,
	}, e.workflowName, e.input)
	handle, err := s.client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: update, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return err
	}
	return handle.Get(ctx, result)
}

// CordonHost marks a host so that it gets no new members, or clears the mark.
func (s *Starter) CordonHost(ctx context.Context, name string, cordon bool) (workflows.Host, error) {
	var host workflows.Host
	err := s.updateHosts(ctx, workflows.CordonHostUpdate, &host, name, workflows.HostMark{Host: name, Cordon: cordon})
	return host, err
}

// DrainHost moves a host's members to other hosts; the host is drained once its Members
// count is 0. It refuses, naming the cluster, role and constraint, when some cluster with
// members there could not hold them all on the hosts that would be left.
func (s *Starter) DrainHost(ctx context.Context, name string) (workflows.Host, error) {
	if err := s.refuseInMaintenance(ctx, "drain"); err != nil {
		return workflows.Host{}, err
	}
	if err := s.checkDrain(ctx, name); err != nil {
		return workflows.Host{}, err
	}
	var host workflows.Host
	err := s.updateHosts(ctx, workflows.DrainHostUpdate, &host, name, name)
	return host, err
}

// checkDrain places every member of each cluster on the host afresh on the other ready
// hosts, as the clusters themselves would: placement rules (maxPerHost, host labels,
// spreadBy) are each cluster's, so the registry alone cannot tell. A cluster whose worker
// cannot answer is left to wait for room itself, saying why, as before this check.
func (s *Starter) checkDrain(ctx context.Context, name string) error {
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(hosts, func(h workflows.Host) bool { return h.Name == name })
	if i < 0 {
		return nil // the registry refuses an unknown host by name
	}
	// Not hosts[i].Members: clusters report their placement to the registry a moment after
	// it changes, so the clusters themselves are asked.
	hosts[i].Draining = true
	clusters, err := s.List(ctx, false)
	if err != nil {
		return err
	}
	for _, c := range clusters {
		status, err := s.query(ctx, c.Name, true)
		if err != nil || !slices.ContainsFunc(status.Roles, func(r workflows.RoleStatus) bool {
			return slices.ContainsFunc(r.Members, func(m workflows.MemberStatus) bool { return m.Host == name })
		}) {
			continue
		}
		desired := spec.Cluster{Name: c.Name}
		for _, r := range status.Roles {
			desired.Roles = append(desired.Roles, spec.Role{Name: r.Name, Members: r.Desired, Placement: r.Placement})
		}
		if err := workflows.CheckPlacement(desired, hosts); err != nil {
			return apperr.Errorf(apperr.Conflict, "drain refused: without host %s, cluster %s could not hold its members: %s", name, c.Name, err)
		}
	}
	return nil
}

// ForgetHost removes a lost or empty host from the registry.
func (s *Starter) ForgetHost(ctx context.Context, name string) (workflows.Host, error) {
	var host workflows.Host
	err := s.updateHosts(ctx, workflows.ForgetHostUpdate, &host, name, name)
	return host, err
}

func (s *Starter) updateHosts(ctx context.Context, update string, result any, host string, arg any) error {
	info, err := s.registry(ctx)
	switch {
	case err != nil:
		return err
	case !info.found:
		return apperr.Errorf(apperr.NotFound, "no host is registered (start a worker with --host)")
	}
	id := workflows.HostsWorkflowID
	if info.Sharded {
		id = workflows.HostShardWorkflowID(workflows.HostShard(host))
	}
	handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: update, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, result)
	}
	if isNotFound(err) {
		return s.unknownHost(ctx, update, host)
	}
	return updateError(update, err)
}

// unknownHost refuses an update of a host whose shard never started, as the shard would
// have: naming the hosts there are.
func (s *Starter) unknownHost(ctx context.Context, update, host string) error {
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	action := strings.TrimSuffix(update, "-host")
	return apperr.Errorf(apperr.NotFound, "%s refused: no host %q (hosts: %s)", action, host, plan.Abbreviate(names))
}

// updateError turns a validator's refusal into its apperr code, and names the action in
// any other error.
func updateError(action string, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if code, ok := apperr.Known(appErr.Type()); ok {
			return apperr.Errorf(code, "%s", appErr.Message())
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	return nil
}

// WaitDrained waits until a draining host holds no members, calling progress whenever its
// count changes. It fails if the drain is lifted (uncordon) or the host is lost meanwhile.
// Each second it asks the registry and the host's own shard, not the fleet's 64.
func (s *Starter) WaitDrained(ctx context.Context, name string, progress func(workflows.Host)) (workflows.Host, error) {
	last := -1
	for {
		h, found, err := s.host(ctx, name)
		if err != nil {
			return workflows.Host{}, err
		}
		if !found {
			return workflows.Host{}, apperr.Errorf(apperr.Gone, "host %s left the registry while draining", name)
		}
		if h.Members != last {
			progress(h)
			last = h.Members
		}
		switch {
		case h.Members == 0:
			return h, nil
		case !h.Draining:
			return h, apperr.Errorf(apperr.Conflict, "host %s is no longer draining (uncordoned); %d members stay on it", name, h.Members)
		case h.Lost:
			return h, apperr.Errorf(apperr.Failed, "host %s was lost while draining; its %d members are replaced after their replaceAfter", name, h.Members)
		}
		select {
		case <-ctx.Done():
			return h, fmt.Errorf("waiting for host %s to drain (%d members left): %w", name, h.Members, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// hostsWait bounds how long a deploy waits for a fleet's first ready host.
const hostsWait = time.Minute

// fleetHosts returns the hosts a new cluster is placed on. In single-host mode (no host
// registered, no host worker polling) there are none. In a fleet, a member is never placed
// without a host: a deploy that finds no ready host (the hosts are starting, or registered
// but not checked in yet) waits up to hostsWait for one, then is refused, naming them.
func (s *Starter) fleetHosts(ctx context.Context, hosts []workflows.Host) ([]workflows.Host, error) {
	pollers, anyWorker, err := s.hostWorkers(ctx)
	if err != nil {
		return nil, err
	}
	// With no worker polling at all, the fleet may be starting (dev --hosts answers before
	// its hosts poll): give the first worker a moment to show which mode this is.
	for wait := time.Now().Add(firstWorkerWait); len(hosts) == 0 && !anyWorker && time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if pollers, anyWorker, err = s.hostWorkers(ctx); err != nil {
			return nil, err
		}
	}
	if len(hosts) == 0 && len(pollers) == 0 {
		return nil, nil // single-host mode (or no worker yet: the workflow waits for one)
	}
	deadline, pollersDeadline := time.Now().Add(hostsWait), time.Now().Add(pollersWait)
	// The hosts whose workers poll are waited for too, a while, until each is up: they
	// register at once, each with its own shard of the registry, and a deploy that went on
	// with the first one ready put every member there.
	for !slices.ContainsFunc(hosts, workflows.Host.Schedulable) || !allUp(pollers, hosts) && time.Now().Before(pollersDeadline) {
		if time.Now().After(deadline) {
			what := "no host has registered"
			if len(hosts) > 0 {
				what = fmt.Sprintf("no host is ready (%s)", describeHostStates(hosts))
			}
			return nil, apperr.Errorf(apperr.Unavailable, "deploy refused: this namespace has host workers (%s), but %s after %s; see `clusterflow hosts`",
				strings.Join(pollers, ", "), what, hostsWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if hosts, err = s.Hosts(ctx); err != nil {
			return nil, err
		}
	}
	return hosts, nil
}

// hostsOnceUp lists the hosts once every host whose worker polls is up, or pollersWait has
// passed: a worker started a moment ago may not have registered yet.
func (s *Starter) hostsOnceUp(ctx context.Context) ([]workflows.Host, error) {
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	pollers, _, err := s.hostWorkers(ctx)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(pollersWait); !allUp(pollers, hosts) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if hosts, err = s.Hosts(ctx); err != nil {
			return nil, err
		}
	}
	return hosts, nil
}

// allUp says whether every named host is registered and not lost (checked in).
func allUp(names []string, hosts []workflows.Host) bool {
	for _, name := range names {
		if !slices.ContainsFunc(hosts, func(h workflows.Host) bool { return h.Name == name && !h.Lost }) {
			return false
		}
	}
	return true
}

// pollersWait bounds how long a deploy waits for the hosts whose workers poll to be up.
const pollersWait = 10 * time.Second

// firstWorkerWait bounds how long a deploy that finds no worker at all waits for one to
// poll before it starts in single-host mode.
const firstWorkerWait = 5 * time.Second

// hostWorkers names the hosts whose workers poll the task queue now, and says whether any
// worker does.
func (s *Starter) hostWorkers(ctx context.Context) ([]string, bool, error) {
	resp, err := s.client.DescribeTaskQueue(ctx, s.taskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, false, fmt.Errorf("describe task queue %s: %w", s.taskQueue, err)
	}
	var hosts []string
	for _, p := range resp.GetPollers() {
		if _, host, ok := strings.Cut(p.GetIdentity(), workflows.HostWorkerIdentity); ok && !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	slices.Sort(hosts)
	return hosts, len(resp.GetPollers()) > 0, nil
}

func describeHostStates(hosts []workflows.Host) string {
	var parts []string
	for _, h := range hosts {
		parts = append(parts, h.Name+" "+string(h.State()))
	}
	return strings.Join(parts, ", ")
}
