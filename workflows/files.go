package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
)

// writeClusterFiles refreshes the configmeta members read, and installs the startscripts
// when asked (once per operation, to keep scripts out of every activity input).
func (w *clusterWorkflow) writeClusterFiles(ctx workflow.Context, withScripts bool) error {
	if err := w.filesLock.Lock(ctx); err != nil {
		return err
	}
	defer w.filesLock.Unlock()
	w.state.ConfigMetaVersion++
	for i := range w.state.Roles {
		for j := range w.state.Roles[i].Members {
			m := &w.state.Roles[i].Members[j]
			switch {
			case m.State == MemberReplacing && m.UnlistedFrom == 0:
				m.UnlistedFrom = w.state.ConfigMetaVersion
			case m.ListedIn == 0 && m.State != MemberDeleted && m.State != MemberRogue:
				m.ListedIn = w.state.ConfigMetaVersion
			}
		}
	}
	files, err := packedFiles(w.state.Name, w.configMeta())
	if err != nil {
		return err
	}
	if withScripts {
		files.Scripts = w.spec.Scripts
	}
	failed := w.onEachHost(withQuickActivity(ctx, "write files of "+w.state.Name), w.memberHosts(), func(ctx workflow.Context, _ string) error {
		return workflow.ExecuteActivity(ctx, acts.WriteClusterFiles, files).Get(ctx, nil)
	})
	if err, ok := failed[""]; ok {
		return err
	}
	if len(failed) > 0 {
		// A host that cannot be reached now reads the files written once it is back; the
		// members elsewhere carry on.
		w.logger.Warn("Could not write the cluster's files on some hosts", "Failures", describeFailures(failed))
	}
	return nil
}

func (w *clusterWorkflow) configMeta() backend.ConfigMeta {
	meta := backend.ConfigMeta{Cluster: w.state.Name}
	for _, r := range w.state.Roles {
		role := backend.ConfigMetaRole{Name: r.Name, DependsOn: r.DependsOn, Members: []string{}}
		if role.DependsOn == nil {
			role.DependsOn = []string{}
		}
		for _, m := range r.Members {
			if m.State == MemberDeleted || m.State == MemberRogue || m.State == MemberReplacing {
				continue // gone, never a member, or on its way out
			}
			role.Members = append(role.Members, m.Name)
			node := backend.ConfigMetaNode{Name: m.Name, Role: r.Name, Ordinal: m.Ordinal, State: string(m.State), Host: m.Host}
			if h := w.hostOf(m.Host); h != nil {
				node.Address = h.Address
			}
			meta.Members = append(meta.Members, node)
		}
		meta.Roles = append(meta.Roles, role)
	}
	return meta
}

// packedFiles carries configmeta as is, or gzipped when it lists thousands of members.
func packedFiles(cluster string, meta backend.ConfigMeta) (backend.ClusterFiles, error) {
	packed, err := gzjson.PackIfLarge(meta)
	if packed == nil {
		return backend.ClusterFiles{Cluster: cluster, ConfigMeta: meta}, err
	}
	return backend.ClusterFiles{Cluster: cluster, ConfigMeta: backend.ConfigMeta{Cluster: cluster}, ConfigMetaGzip: packed}, err
}
