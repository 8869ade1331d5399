package cluster

import (
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// writeClusterFiles refreshes the configmeta members read on every host holding members.
// Runs from before bounded payloads also install the startscripts when asked (once per
// operation); later runs send scripts and envs to the hosts that lack them (writeFiles).
func (e *executor) writeClusterFiles(ctx workflow.Context, withScripts bool) error {
	if err := e.w.filesLock.Lock(ctx); err != nil {
		return err
	}
	defer e.w.filesLock.Unlock()
	e.w.state.ConfigMetaVersion++
	for i := range e.w.state.Roles {
		for j := range e.w.state.Roles[i].Members {
			m := &e.w.state.Roles[i].Members[j]
			switch {
			case m.State == plan.MemberReplacing && m.UnlistedFrom == 0:
				m.UnlistedFrom = e.w.state.ConfigMetaVersion
			case m.ListedIn == 0 && m.State != plan.MemberDeleted && m.State != plan.MemberRogue:
				m.ListedIn = e.w.state.ConfigMetaVersion
			}
		}
	}
	files, err := packedFiles(e.w.Folder(), e.configMeta())
	if err != nil {
		return err
	}
	if withScripts && !e.w.bounded {
		files.Scripts = e.w.spec.Scripts
	}
	failed := e.writeFiles(ctx, "write files of "+e.w.state.Name, hosts.MemberHosts(&e.w.state), files)
	if err, ok := failed[""]; ok {
		return err
	}
	if len(failed) > 0 {
		// A host that cannot be reached now reads the files written once it is back; the
		// members elsewhere carry on.
		e.w.logger.Warn("Could not write the cluster's files on some hosts", "Failures", hosts.DescribeFailures(failed))
	}
	return nil
}

// writeFiles writes files on each of hosts (on the shared queue in single-host mode) and
// returns the hosts where it failed. In bounded runs it adds the startscripts and the
// roles' envs for a host that does not hold the current ones yet, so that they travel to
// a host once rather than with every write or every script run.
func (e *executor) writeFiles(ctx workflow.Context, summary string, to []string, files backend.ClusterFiles) map[string]error {
	var digest string
	var scripts map[string]string
	var envs map[string]map[string]string
	var signed map[string]signing.Signed
	if e.w.bounded {
		digest, scripts, envs, signed = e.installable(workflow.GetInfo(ctx).Namespace)
	}
	// Hosts are written to at once, and the writes scheduled in one workflow task must stay
	// far under Temporal's 4 MiB: a first write to a host carries the scripts (up to 1 MiB)
	// and the envs besides the configmeta. So a write waits while others in flight hold
	// more than hostWriteBytes; a write alone always goes.
	sizes := map[bool]int{false: workflows.PayloadSize(files)}
	inFlight := flow.Slots{Limit: hostWriteBytes}
	files.FolderKey = e.w.state.FolderKey
	return hosts.OnEach(flow.WithQuickActivity(ctx, summary), &e.w.state, e.w.setUpElsewhere, to, func(ctx workflow.Context, host string) error {
		f := files
		install := e.w.bounded && e.w.state.Installed[host] != digest
		if install {
			f.Scripts, f.Envs, f.Signed = scripts, envs, signed
			if _, ok := sizes[true]; !ok {
				sizes[true] = workflows.PayloadSize(f)
			}
		}
		size := sizes[install]
		if err := inFlight.Wait(ctx, size, nil); err != nil {
			return err
		}
		inFlight.Take(size)
		err := flow.ExecuteActivity(ctx, flow.ActWriteClusterFiles, f).Get(ctx, nil)
		inFlight.Give(size)
		if err != nil {
			return err
		}
		if e.w.bounded {
			if e.w.state.Installed == nil {
				e.w.state.Installed = map[string]string{}
			}
			e.w.state.Installed[host] = digest
		}
		return nil
	})
}

// hostWriteBytes bounds the cluster files in flight to hosts at once.
const hostWriteBytes = 1 << 20

// installable is what every host holding members needs of the spec, and its digest: the
// startscripts and the roles' envs, by hash, including those of roles still being removed,
// and the spec's manifest with its signature, when it has one, for hosts to check (the
// workflow only carries it; an unsigned spec sends none, and its digest is as before).
func (e *executor) installable(namespace string) (digest string, scripts map[string]string, envs map[string]map[string]string, signed map[string]signing.Signed) {
	envs = map[string]map[string]string{}
	for _, r := range slices.Concat(e.w.spec.Roles, e.w.retiring) {
		if hash := spec.EnvHash(r.Env); hash != "" {
			envs[hash] = r.Env
		}
	}
	names := slices.Concat(slices.Sorted(maps.Keys(e.w.spec.Scripts)), slices.Sorted(maps.Keys(envs)))
	var s *signing.Signed
	switch sig := e.w.spec.Signature; {
	case sig != nil:
		s = &signing.Signed{Manifest: signing.ManifestOf(e.w.spec, namespace), Signature: *sig}
	case e.w.signedGenerations:
		// Unsigned, so that a host trusting keys knows the newest generation is not signed.
		s = &signing.Signed{Manifest: signing.ManifestOf(e.w.spec, namespace)}
		s.Manifest.Generation = e.w.state.SpecGeneration
	}
	if s != nil {
		signed = map[string]signing.Signed{s.Hash(): *s}
		names = append(names, "signed "+s.Hash())
	}
	return spec.ContentHash([]byte(strings.Join(names, "\n"))), e.w.spec.Scripts, envs, signed
}

// forgetInstalled makes the next write send the scripts and envs to host again: it was
// lost or restarted, and may not hold them any more.
func (c *cluster) ForgetInstalled(host string) {
	delete(c.state.Installed, host)
}

func (e *executor) configMeta() backend.ConfigMeta {
	meta := backend.ConfigMeta{Cluster: e.w.state.Name}
	for _, r := range e.w.state.Roles {
		// Members a change no longer wants are listed as leaving until they are gone, so
		// that a decommission, a teardown and the survivors can tell them apart.
		leaving := map[string]bool{}
		if e.w.lifecycle {
			_, unwanted := plan.SplitMembers(r, plan.DesiredMembers(e.w.spec, r.Name))
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
			replaced := m.State == plan.MemberReplacing && !e.w.appContract
			if m.State == plan.MemberDeleted || m.State == plan.MemberRogue || replaced {
				continue // gone, never a member, or on its way out
			}
			role.Members = append(role.Members, m.Name)
			node := backend.ConfigMetaNode{Name: m.Name, Role: r.Name, Ordinal: m.Ordinal, State: string(m.State), Host: m.Host}
			if leaving[m.Name] || m.State == plan.MemberReplacing {
				node.State = workflows.ConfigMetaLeaving
			}
			if e.w.lifecycle {
				node.Ports = m.Ports
				if !e.w.state.OnHosts {
					node.Address = "127.0.0.1" // every member is on this one machine
				}
			}
			if h := hosts.Of(&e.w.state, m.Host); h != nil {
				node.Address = h.Address
			}
			meta.Members = append(meta.Members, node)
		}
		meta.Roles = append(meta.Roles, role)
	}
	return meta
}

// packedFiles carries configmeta as is, or gzipped when it lists thousands of members.
func packedFiles(folder backend.ClusterRef, meta backend.ConfigMeta) (backend.ClusterFiles, error) {
	packed, err := gzjson.PackIfLarge(meta)
	if packed == nil {
		return backend.ClusterFiles{Cluster: folder.Name, Home: folder.Home, ConfigMeta: meta}, err
	}
	return backend.ClusterFiles{Cluster: folder.Name, Home: folder.Home, ConfigMeta: backend.ConfigMeta{Cluster: folder.Name}, ConfigMetaGzip: packed}, err
}

// folder is the cluster's folder on its hosts: its name and home.
func (c *cluster) Folder() backend.ClusterRef {
	return backend.ClusterRef{Name: c.state.Name, Home: c.state.Home}
}

// memberRef names a member of the cluster to its host.
func (c *cluster) memberRef(role, name string) backend.MemberRef {
	return backend.MemberRef{Cluster: c.state.Name, Home: c.state.Home, Role: role, Name: name}
}
