package local

import (
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// resources are what bound a run's member as a whole (roles[].resources), the host's
// defaults (MemberResources) filling in what the role leaves out. Of a role's container
// fields the local backend takes only its resources: the others say how a member runs as a
// container, which a folder of the host is not. A bound the host cannot keep (no cgroup
// controller for it) is refused by name, rather than left unkept.
func (l *Backend) resources(run backend.ScriptRun) (runner.Resources, error) {
	var want spec.Resources
	if c := run.Container; c != nil {
		asContainer := spec.ContainerFields(spec.Container{Image: c.Image, User: c.User, Volumes: c.Volumes, Publish: c.Publish, Privileged: c.Privileged})
		if len(asContainer) > 0 {
			return runner.Resources{}, &backend.RefusedError{Reason: fmt.Sprintf("role %s sets %s, which say how its members run as containers; this host's backend is local, which runs members in folders of the host: run the cluster on hosts started with --backend docker, or leave those fields out",
				run.Member.Role, strings.Join(asContainer, ", "))}
		}
		want = c.Resources
	}
	r := runner.Resources{CPUs: want.CPUs, Memory: want.Memory, PIDs: want.PIDs}
	if r.CPUs == 0 {
		r.CPUs = l.MemberResources.CPUs
	}
	if r.Memory == 0 {
		r.Memory = l.MemberResources.Memory
	}
	if r.PIDs == 0 {
		r.PIDs = l.MemberResources.PIDs
	}
	if missing := runner.Unbounded(r); len(missing) > 0 {
		return r, &backend.RefusedError{Reason: fmt.Sprintf("role %s's members are to be bounded in %s (roles[].resources, or this host's defaults), which this host cannot do: it has no cgroup controller it may use for them, in cgroup v2 or v1",
			run.Member.Role, strings.Join(missing, ", "))}
	}
	return r, nil
}
