package hosts

import (
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// What a cluster keeps on its hosts: configmeta (the members as each sees them), the
// startscripts and envs, the signed manifest, and, for a member set up elsewhere, the
// stale sandbox to remove.

// Installable is what every host holding members needs of the spec, and its digest: the
// startscripts and the roles' envs, by hash, including those of roles still being removed,
// and the spec's manifest with its signature, when it has one, for hosts to check (the
// workflow only carries it; an unsigned spec sends none, and its digest is as before).
func Installable(state *workflows.ClusterState, desired spec.Cluster, retiring []spec.Role, signedGenerations bool, namespace string) (digest string, scripts map[string]string, envs map[string]map[string]string, signed map[string]signing.Signed) {
	envs = map[string]map[string]string{}
	for _, r := range slices.Concat(desired.Roles, retiring) {
		if hash := spec.EnvHash(r.Env); hash != "" {
			envs[hash] = r.Env
		}
	}
	names := slices.Concat(slices.Sorted(maps.Keys(desired.Scripts)), slices.Sorted(maps.Keys(envs)))
	var s *signing.Signed
	switch sig := desired.Signature; {
	case sig != nil:
		s = &signing.Signed{Manifest: signing.ManifestOf(desired, namespace), Signature: *sig}
	case signedGenerations:
		// Unsigned, so that a host trusting keys knows the newest generation is not signed.
		s = &signing.Signed{Manifest: signing.ManifestOf(desired, namespace)}
		s.Manifest.Generation = state.SpecGeneration
	}
	if s != nil {
		signed = map[string]signing.Signed{s.Hash(): *s}
		names = append(names, "signed "+s.Hash())
	}
	return spec.ContentHash([]byte(strings.Join(names, "\n"))), desired.Scripts, envs, signed
}

// ConfigMeta is what the cluster's members read of it: its roles and members, with their
// state, host, address and ports; lifecycle and appContract are the run's (see
// workflows/internal/change).
func ConfigMeta(s *workflows.ClusterState, desired spec.Cluster, lifecycle, appContract bool) backend.ConfigMeta {
	meta := backend.ConfigMeta{Cluster: s.Name}
	for _, r := range s.Roles {
		// Members a change no longer wants are listed as leaving until they are gone, so
		// that a decommission, a teardown and the survivors can tell them apart.
		leaving := map[string]bool{}
		if lifecycle {
			_, unwanted := plan.SplitMembers(r, plan.DesiredMembers(desired, r.Name))
			for _, m := range unwanted {
				leaving[m.Name] = true
			}
		}
		role := backend.ConfigMetaRole{Name: r.Name, DependsOn: r.DependsOn, Members: []string{}}
		if role.DependsOn == nil {
			role.DependsOn = []string{}
		}
		for _, m := range r.Members {
			// A member being replaced stays, as leaving, until it is gone (change.AppContract),
			// so that its successor can take it out of the app's own membership first.
			replaced := m.State == plan.MemberReplacing && !appContract
			if m.State == plan.MemberDeleted || m.State == plan.MemberRogue || replaced {
				continue // gone, never a member, or on its way out
			}
			role.Members = append(role.Members, m.Name)
			node := backend.ConfigMetaNode{Name: m.Name, Role: r.Name, Ordinal: m.Ordinal, State: string(m.State), Host: m.Host}
			if leaving[m.Name] || m.State == plan.MemberReplacing {
				node.State = workflows.ConfigMetaLeaving
			}
			if lifecycle {
				node.Ports = m.Ports
				if !s.OnHosts {
					node.Address = "127.0.0.1" // every member is on this one machine
				}
			}
			if h := Of(s, m.Host); h != nil {
				node.Address = h.Address
			}
			node.Bootstrap = m.Bootstrap
			meta.Members = append(meta.Members, node)
		}
		meta.Roles = append(meta.Roles, role)
	}
	return meta
}

// PackFiles carries configmeta as is, or gzipped when it lists thousands of members.
func PackFiles(folder backend.ClusterRef, meta backend.ConfigMeta) (backend.ClusterFiles, error) {
	packed, err := gzjson.PackIfLarge(meta)
	if packed == nil {
		return backend.ClusterFiles{Cluster: folder.Name, Home: folder.Home, ConfigMeta: meta}, err
	}
	return backend.ClusterFiles{Cluster: folder.Name, Home: folder.Home, ConfigMeta: backend.ConfigMeta{Cluster: folder.Name}, ConfigMetaGzip: packed}, err
}

// RemoveStale removes the stale sandboxes on hosts that can be reached, at once; those on
// hosts still lost wait for them.
func RemoveStale(ctx workflow.Context, state *workflows.ClusterState, logger log.Logger) {
	var now []workflows.StaleMember
	for _, s := range state.Stale {
		if Reachable(state, s.Host) {
			now = append(now, s)
		}
	}
	if len(now) == 0 {
		return
	}
	removed := make([]bool, len(now))
	// A lost host may have held thousands: at most staleAtOnce removals are pending at a
	// time, far under Temporal's 2,000 pending activities.
	for first := 0; first < len(now); first += staleAtOnce {
		wg := workflow.NewWaitGroup(ctx)
		for i := first; i < min(first+staleAtOnce, len(now)); i++ {
			s := now[i]
			wg.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				ref := backend.MemberRef{Cluster: state.Name, Home: state.Home, Role: s.Role, Name: s.Member}
				err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, "remove stale "+s.Member), s.Host), flow.ActRemoveMember, ref).Get(ctx, nil)
				if err != nil {
					logger.Warn("Could not remove a stale sandbox; trying again next pass", "Member", s.Member, "Host", s.Host, "Error", err)
					return
				}
				removed[i] = true
				logger.Info("Removed a stale sandbox", "Member", s.Member, "Host", s.Host)
			})
		}
		wg.Wait(ctx)
	}
	state.Stale = slices.DeleteFunc(state.Stale, func(s workflows.StaleMember) bool {
		i := slices.Index(now, s)
		return i >= 0 && removed[i]
	})
}

// staleAtOnce bounds the stale sandboxes removed at once.
const staleAtOnce = 200
