package cluster

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// WriteClusterFiles refreshes the configmeta members read on every host holding members.
// Runs from before bounded payloads also install the startscripts when asked (once per
// operation); later runs send scripts and envs to the hosts that lack them (writeFiles).
func (e *executor) WriteClusterFiles(ctx workflow.Context, withScripts bool) error {
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
	meta := hosts.ConfigMeta(&e.w.state, e.w.spec, e.w.lifecycle, e.w.appContract)
	var files backend.ClusterFiles
	var err error
	if e.w.configMetaByQuery && e.w.state.OnHosts {
		files, err = e.w.configMetas.Files(e.w.Folder(), workflow.GetInfo(ctx).WorkflowExecution.ID, meta)
	} else {
		files, err = hosts.PackFiles(e.w.Folder(), meta)
	}
	if err != nil {
		return err
	}
	if withScripts && !e.w.bounded {
		files.Scripts = e.w.spec.Scripts
	}
	failed := e.WriteFiles(ctx, "write files of "+e.w.state.Name, hosts.MemberHosts(&e.w.state), files)
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

// WriteFiles writes files on each of hosts (on the shared queue in single-host mode) and
// returns the hosts where it failed. In bounded runs it adds the startscripts and the
// roles' envs for a host that does not hold the current ones yet, so that they travel to
// a host once rather than with every write or every script run. Past hosts.InChildren
// hosts, children write them (change.WritingInChildren).
func (e *executor) WriteFiles(ctx workflow.Context, summary string, to []string, files backend.ClusterFiles) map[string]error {
	var digest string
	var install backend.ClusterFiles
	if e.w.bounded {
		digest, install.Scripts, install.Envs, install.Signed = hosts.Installable(&e.w.state, e.w.spec, e.w.retiring, e.w.signedGenerations, workflow.GetInfo(ctx).Namespace)
	}
	files.FolderKey = e.w.state.FolderKey
	needsInstall := func(host string) bool { return e.w.bounded && e.w.state.Installed[host] != digest }
	installed := func(host string) {
		if e.w.bounded {
			if e.w.state.Installed == nil {
				e.w.state.Installed = map[string]string{}
			}
			e.w.state.Installed[host] = digest
		}
	}
	if e.w.bounded && e.w.setUpElsewhere && e.w.state.OnHosts && len(to) > hosts.InChildren &&
		workflow.GetVersion(ctx, change.WritingInChildren, workflow.DefaultVersion, 1) >= 1 {
		e.w.writings++
		failed := hosts.WriteInChildren(ctx, &e.w.state, summary, to, e.w.writings, files, install, needsInstall)
		for _, host := range to {
			if _, ok := failed[host]; !ok {
				installed(host)
			}
		}
		return failed
	}
	w := hosts.NewWriter(files, install)
	return hosts.OnEach(flow.WithQuickActivity(ctx, summary), &e.w.state, e.w.setUpElsewhere, e.w.hostsAtOnce(), to, func(ctx workflow.Context, host string) error {
		if err := w.Write(ctx, needsInstall(host)); err != nil {
			return err
		}
		installed(host)
		return nil
	})
}

// hostsAtOnce bounds the hosts a cluster-wide activity (files, listing, removal) runs on at
// once in runs that send configmeta by reference (their writes are small, so bytes no
// longer bound them): a cluster spread over thousands of hosts stays far under Temporal's
// 2,000 pending activities. Runs from before ran on every host at once.
func (c *cluster) hostsAtOnce() int {
	if c.configMetaByQuery {
		return 500
	}
	return 0
}

// forgetInstalled makes the next write send the scripts and envs to host again: it was
// lost or restarted, and may not hold them any more.
func (c *cluster) ForgetInstalled(host string) {
	delete(c.state.Installed, host)
}

// folder is the cluster's folder on its hosts: its name and home.
func (c *cluster) Folder() backend.ClusterRef {
	return backend.ClusterRef{Name: c.state.Name, Home: c.state.Home}
}
