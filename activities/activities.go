package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// Activities performs member operations through a backend.
type Activities struct {
	Backend backend.Backend
	// Host is the host this worker serves, or nil in single-host mode.
	Host *workflows.HostRegistration
	// Admission is what this host runs, enforced here whatever placed a member on it:
	// the workflow that asks is not what the host trusts.
	Admission workflows.Admission
	// Trusted, when set, are the keys whose signed specs alone this host runs scripts of.
	Trusted signing.Trusted
	// NamespaceID is the ID of the namespace this worker serves: a spec signed for another
	// namespace's (one of the same name on another server) is not run here.
	NamespaceID string
}

// refuse fails, for good, a task for a cluster (with these env names) that the host does
// not run. Teardowns and removals are never refused: the host cleans up what it holds.
func (a *Activities) refuse(ctx context.Context, cluster string, envNames []string) error {
	why := a.Admission.Refuses(cluster, activity.GetInfo(ctx).WorkflowNamespace, envNames)
	if why == "" {
		return nil
	}
	host := "this host"
	if a.Host != nil {
		host = "host " + a.Host.Name
	}
	msg := fmt.Sprintf("%s %s", host, why)
	activity.GetLogger(ctx).Warn("Refused a task the host does not run", "cluster", cluster, "reason", msg)
	return temporal.NewNonRetryableApplicationError(msg, ErrHostRefused, nil)
}

// refuseUnsigned fails, for good, a script run that no spec signed by a trusted key
// covers, when the host trusts keys: the member goes to config_error saying why (unsigned
// spec, a signature by an unknown key, a change made after signing), and nothing runs.
func (a *Activities) refuseUnsigned(ctx context.Context, run backend.ScriptRun) error {
	if a.Trusted == nil {
		return nil
	}
	signed, err := a.Backend.SignedSpecs(ctx, run.Member.Folder())
	if err != nil {
		return refuseElsewhere(err)
	}
	env := run.EnvHash
	if env == "" {
		env = spec.EnvHash(run.Env)
	}
	err = a.Trusted.Check(signed, signing.Run{
		Cluster: run.Member.Cluster, Namespace: activity.GetInfo(ctx).WorkflowNamespace, NamespaceID: a.NamespaceID, Role: run.Member.Role,
		Script: run.ScriptHash, Env: env, Event: run.Event, Action: run.Action, Params: run.Params,
		Runtime: spec.RuntimeHash(run.Container, run.Limits, run.Probe), Container: run.Container != nil,
	})
	if err == nil {
		return nil
	}
	activity.GetLogger(ctx).Warn("Refused a script no trusted signature covers", "member", run.Member.Name, "event", run.Event, "reason", err)
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrHostRefused, nil)
}

// WriteClusterFiles installs startscripts and writes the configmeta every member reads.
func (a *Activities) WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error {
	defer heartbeatWhileRunning(ctx)()
	if from := files.ConfigMetaFrom; from != nil {
		packed, err := fetchConfigMeta(ctx, *from)
		if err != nil {
			return err
		}
		files.ConfigMetaGzip, files.ConfigMetaFrom = packed, nil
	}
	if err := files.Unpack(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", err)
	}
	var names []string
	for _, env := range files.Envs {
		names = append(names, slices.Collect(maps.Keys(env))...)
	}
	if err := a.refuse(ctx, files.Cluster, names); err != nil {
		return err
	}
	if err := a.refuseOlderSigned(ctx, files); err != nil {
		return err
	}
	if a.Trusted != nil {
		files.SignedMark = a.Trusted.NewestSignedAt(slices.Collect(maps.Values(files.Signed)))
	}
	return refuseElsewhere(a.Backend.WriteClusterFiles(ctx, files))
}

// refuseOlderSigned fails, for good, a write that brings a signed spec older than the
// newest this host holds of the cluster (its high-water mark), when the host trusts keys:
// a cluster's generations only grow, so an older signed spec is one sent to go back.
func (a *Activities) refuseOlderSigned(ctx context.Context, files backend.ClusterFiles) error {
	if a.Trusted == nil || len(files.Signed) == 0 {
		return nil
	}
	held, err := a.Backend.SignedSpecs(ctx, files.Folder())
	if err != nil {
		return refuseElsewhere(err)
	}
	mark := a.Trusted.NewestSigned(held)
	// The name's mark outlives the cluster: a new cluster of the name takes no spec signed
	// before the newest this host took of it.
	byName, err := a.Backend.SignedMark(ctx, files.Cluster)
	if err != nil {
		return refuseElsewhere(err)
	}
	for _, s := range files.Signed {
		if a.Trusted.Verify(s) != nil {
			continue
		}
		if s.Manifest.Generation < mark {
			msg := fmt.Sprintf("the spec signed for generation %d of cluster %s is older than generation %d, which this host already runs: it goes back to no older signed spec", s.Manifest.Generation, files.Cluster, mark)
			return temporal.NewNonRetryableApplicationError(msg, ErrHostRefused, nil)
		}
		if s.Manifest.SignedAt.Before(byName) {
			when := "before signatures said when"
			if !s.Manifest.SignedAt.IsZero() {
				when = "at " + s.Manifest.SignedAt.Format(time.RFC3339)
			}
			msg := fmt.Sprintf("the spec of cluster %s was signed %s, before the one signed at %s that this host already took for a cluster of that name: an older signed spec does not come back, even under a new deploy of the name; sign it again", files.Cluster, when, byName.Format(time.RFC3339))
			return temporal.NewNonRetryableApplicationError(msg, ErrHostRefused, nil)
		}
	}
	return nil
}

// CreateMember makes a member on the backend.
func (a *Activities) CreateMember(ctx context.Context, m backend.MemberRef) error {
	if err := a.refuse(ctx, m.Cluster, nil); err != nil {
		return err
	}
	return refuseElsewhere(a.Backend.CreateMember(ctx, m))
}

// RemoveMember stops what a member left running and removes it, unless another
// server or namespace owns its cluster's folder now.
func (a *Activities) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	return refuseElsewhere(a.Backend.RemoveMember(ctx, m))
}

// ListMembers lists the members the backend has for the cluster, for reconciling. cluster
// is its key (NAME or NAME@HOME; see backend.ClusterRef), as for the activities below.
func (a *Activities) ListMembers(ctx context.Context, cluster string) ([]backend.MemberRef, error) {
	defer heartbeatWhileRunning(ctx)()
	members, err := a.Backend.ListMembers(ctx, cluster)
	return members, refuseElsewhere(err)
}

// ListMemberOrdinals lists the members the backend has for the cluster, as ListMembers
// does, compactly: by role and ordinal ranges, at most listingLimit members.
func (a *Activities) ListMemberOrdinals(ctx context.Context, cluster string) (workflows.MemberListing, error) {
	defer heartbeatWhileRunning(ctx)()
	members, err := a.Backend.ListMembers(ctx, cluster)
	if err != nil {
		return workflows.MemberListing{}, refuseElsewhere(err)
	}
	var listing workflows.MemberListing
	if len(members) > listingLimit {
		members, listing.Truncated = members[:listingLimit], true
	}
	byRole := map[string][]int{}
	for _, m := range members {
		if _, ordinal, ok := spec.ParseMemberName(m.Cluster, m.Name); ok {
			byRole[m.Role] = append(byRole[m.Role], ordinal)
		}
	}
	for _, role := range slices.Sorted(maps.Keys(byRole)) {
		listing.Roles = append(listing.Roles, workflows.RoleListing{Role: role, Ordinals: notice.Ranges(byRole[role])})
	}
	return listing, nil
}

// listingLimit bounds a listing: more than a cluster can have, so that a listing of a
// sane host is never cut, and a payload of at most a few hundred kilobytes.
const listingLimit = 2 * spec.MaxClusterMembers

// RemoveCluster removes the cluster's remaining files, unless another server or namespace
// owns them now.
func (a *Activities) RemoveCluster(ctx context.Context, cluster string) error {
	defer heartbeatWhileRunning(ctx)()
	return refuseElsewhere(a.Backend.RemoveCluster(ctx, cluster))
}

// refuseElsewhere fails for good a step the host refused because another server or
// namespace owns the cluster's folder: asking again changes nothing.
func refuseElsewhere(err error) error {
	var elsewhere *backend.OwnedElsewhereError
	if errors.As(err, &elsewhere) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrHostRefused, nil)
	}
	return err
}

// RunStartscript hands one startscript event for one member to the member's agent and
// returns at once, holding no slot, goroutine or process while the script runs. The agent
// heartbeats its progress and completes the activity: with the backend.ScriptResult on exit 0, and
// otherwise with a non-retryable error whose details are the backend.ScriptResult, tails included.
func (a *Activities) RunStartscript(ctx context.Context, run backend.ScriptRun) (backend.ScriptResult, error) {
	if err := a.refuseUnsigned(ctx, run); err != nil {
		return backend.ScriptResult{}, err
	}
	// The role's env by hash was checked when the cluster's files were written.
	if run.Event != spec.EventTeardown {
		if err := a.refuse(ctx, run.Member.Cluster, slices.Collect(maps.Keys(run.Env))); err != nil {
			return backend.ScriptResult{}, err
		}
	}
	// A configure creates its member first (the backend's LaunchScript does, idempotently),
	// sparing a wide role an activity, and a call, per member.
	info := activity.GetInfo(ctx)
	// A launch may take long before the agent reports anything (a container backend makes
	// the member and pulls its image first, and an engine busy with a wide role takes its
	// time): it is reported meanwhile, so that it is not taken for lost.
	launching := make(chan struct{})
	go heartbeatUntil(ctx, launching, info.HeartbeatTimeout, func() backend.Progress {
		return backend.Progress{Member: run.Member.Name, Event: string(run.Event), LastLine: a.launchProgress(ctx, run.Member, info.HeartbeatTimeout/3)}
	})
	err := a.Backend.LaunchScript(ctx, run, backend.Completion{
		WorkflowID: info.WorkflowExecution.ID, ActivityID: info.ActivityID,
		TaskToken: info.TaskToken,
		// The agent reports a quiet script once within this rather than every 2 s.
		HeartbeatTimeout: info.HeartbeatTimeout,
	})
	close(launching)
	var secretErr *backend.SecretError
	var refused *backend.RefusedError
	var noSandbox *backend.NoSandboxError
	var elsewhere *backend.OwnedElsewhereError
	switch {
	case errors.As(err, &elsewhere):
		return backend.ScriptResult{}, refuseElsewhere(err)
	case errors.As(err, &noSandbox):
		// Nothing to run a script in, and asking again will not make one.
		return backend.ScriptResult{}, temporal.NewNonRetryableApplicationError(noSandbox.Error(), backend.ErrNoSandbox, nil)
	case errors.As(err, &secretErr):
		// Nothing ran, and a retry finds the same host: the operator must supply it.
		return backend.ScriptResult{}, temporal.NewNonRetryableApplicationError(secretErr.Error(), ErrSecretUnavailable, nil)
	case errors.As(err, &refused):
		return backend.ScriptResult{}, temporal.NewNonRetryableApplicationError(refused.Error(), ErrHostRefused, nil)
	case err != nil:
		return backend.ScriptResult{}, fmt.Errorf("launch %s on %s: %w", run.Event, run.Member.Name, err)
	}
	return backend.ScriptResult{}, activity.ErrResultPending
}

// heartbeatUntil reports progress (none if nil) every third of the heartbeat timeout until
// done closes.
func heartbeatUntil(ctx context.Context, done <-chan struct{}, timeout time.Duration, progress func() backend.Progress) {
	if timeout <= 0 {
		return
	}
	tick := time.NewTicker(timeout / 3)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if progress == nil {
				activity.RecordHeartbeat(ctx)
			} else {
				activity.RecordHeartbeat(ctx, progress())
			}
		}
	}
}

// heartbeatWhileRunning heartbeats, as heartbeatUntil, until the returned stop is called:
// for the cluster-wide activities on a host, which the workflows give a short heartbeat
// timeout so that a task started but never run is soon retried. A run shorter than a third
// of the timeout, as nearly all are, sends none.
func heartbeatWhileRunning(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	go heartbeatUntil(ctx, done, activity.GetInfo(ctx).HeartbeatTimeout, nil)
	return func() { close(done) }
}

// launchProgress is what the backend says a launch of the member is doing (pulling its
// image, say), or just that it is launching: the heartbeat is sent either way.
func (a *Activities) launchProgress(ctx context.Context, m backend.MemberRef, within time.Duration) string {
	if w, ok := a.Backend.(backend.LaunchWatcher); ok {
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		if line, err := w.LaunchProgress(ctx, m); err == nil && line != "" {
			return line
		}
	}
	return "launching"
}

// AssignPorts gives members their ports on this host.
func (a *Activities) AssignPorts(ctx context.Context, req backend.PortRequest) (backend.PortAssignment, error) {
	ports, err := a.Backend.AssignPorts(ctx, req)
	return ports, refuseElsewhere(err)
}

// StopScript stops a run whose activity was cancelled, at once, on the member's host.
func (a *Activities) StopScript(ctx context.Context, stop backend.ScriptStop) error {
	return refuseElsewhere(a.Backend.StopScript(ctx, stop))
}

// RecheckMember has the member's host count its checks afresh, taking it for down
// (backend.Rechecker); a backend that checks nothing has nothing to do.
func (a *Activities) RecheckMember(ctx context.Context, m backend.MemberRef) error {
	r, ok := a.Backend.(backend.Rechecker)
	if !ok {
		return nil
	}
	return refuseElsewhere(r.RecheckMember(ctx, m))
}

// ReadMemberLog reads part of a member's script output on the host holding it.
func (a *Activities) ReadMemberLog(ctx context.Context, req backend.LogRequest) (backend.LogChunk, error) {
	chunk, err := a.Backend.ReadLog(ctx, req)
	return chunk, refuseElsewhere(err)
}

// DescribeMember says where a member lives on the host holding it, and what the host ran
// for it.
func (a *Activities) DescribeMember(ctx context.Context, m backend.MemberRef) (backend.MemberDescription, error) {
	d, ok := a.Backend.(backend.Describer)
	if !ok {
		return backend.MemberDescription{}, temporal.NewNonRetryableApplicationError("this host's backend does not describe its members", "NotDescribed", nil)
	}
	desc, err := d.DescribeMember(ctx, m)
	return desc, refuseElsewhere(err)
}

// ListHostClusters lists every cluster this worker's backend holds anything of, with the
// members found there, for finding orphans.
func (a *Activities) ListHostClusters(ctx context.Context) ([]workflows.HostCluster, error) {
	held, err := a.Backend.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	var out []workflows.HostCluster
	for _, c := range held[:min(len(held), workflows.ListedClusters)] {
		found := workflows.HostCluster{Cluster: c.Name, Home: c.Home, Members: []string{}}
		members, err := a.Backend.ListMembers(ctx, c.Key())
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			if len(found.Members) == workflows.ListedMemberNames {
				found.MoreMembers++
				continue
			}
			found.Members = append(found.Members, m.Name)
		}
		out = append(out, found)
	}
	return out, nil
}
