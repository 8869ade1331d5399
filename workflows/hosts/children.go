package hosts

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// InChildren is the number of hosts past which a cluster-wide listing or write runs in
// child workflows of up to workflows.HostsPerChild hosts each, so that the cluster's
// history takes a few events a group rather than three a host, whatever the fleet
// (change.ListingInChildren, change.WritingInChildren).
const InChildren = 100

// inChildren runs a child workflow for each group of up to workflows.HostsPerChild hosts,
// one after the other, so that they run on no more hosts at once than the cluster would
// itself: four children of 500 hosts at once held the embedded server's writes past their
// deadlines, and lost completions held a deploy for the hosts' 5-minute waits. Meanwhile it
// tells the child the hosts of its group that the cluster's view takes for lost
// (workflows.HostsLostSignal), so that no child waits on a dead host longer than the
// cluster would. It hands each child's result to collect, in order, and counts every
// host of a group failed, in failed, when its child failed, collect could not read its
// result, or a cancel stopped the groups not yet begun.
//
// A child is named by the cluster's operations so far (carried from run to run), the
// run's pass of kind and the group, as role children are. A run continued as new counts
// its passes from one again, and the children of the run before are closed with it.
func inChildren(ctx workflow.Context, s *workflows.ClusterState, kind, summary string, hosts []string, pass int,
	start func(ctx workflow.Context, group []string) workflow.ChildWorkflowFuture,
	failed map[string]error, collect func(get func(valuePtr any) error) error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	// A cancelled child answers at once, so waiting for it outlives a cancel.
	waitCtx, _ := workflow.NewDisconnectedContext(ctx)
	told := map[string]bool{}
	i := 0
	for group := range slices.Chunk(hosts, workflows.HostsPerChild) {
		failGroup := func(err error) {
			for _, host := range group {
				failed[host] = err
			}
		}
		if err := ctx.Err(); err != nil {
			failGroup(err)
			continue
		}
		f := start(workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: fmt.Sprintf("%s/%s-%d-%d-%d", id, kind, s.Operations, pass, i),
			// What a child does is worth nothing to anyone but the run that asked for it.
			ParentClosePolicy: enums.PARENT_CLOSE_POLICY_TERMINATE,
			StaticSummary:     fmt.Sprintf("%s on %d hosts (%s … %s)", summary, len(group), group[0], group[len(group)-1]),
		}), group)
		i++
		// Done when the child has ended, a cancelled one included.
		done := false
		workflow.Go(waitCtx, func(ctx workflow.Context) {
			_ = f.Get(ctx, nil)
			done = true
		})
		newlyLost := func() []string {
			var lost []string
			for _, host := range group {
				if !told[host] && !Reachable(s, host) {
					lost = append(lost, host)
				}
			}
			return lost
		}
		for !done {
			_ = workflow.Await(waitCtx, func() bool { return done || len(newlyLost()) > 0 })
			if lost := newlyLost(); len(lost) > 0 && !done {
				for _, host := range lost {
					told[host] = true
				}
				// The signal waits for the child to have started; one that ended meanwhile
				// is not told, and need not be.
				workflow.Go(waitCtx, func(ctx workflow.Context) {
					_ = f.SignalChildWorkflow(ctx, workflows.HostsLostSignal, lost).Get(ctx, nil)
				})
			}
		}
		if err := collect(func(valuePtr any) error { return f.Get(ctx, valuePtr) }); err != nil {
			failGroup(err)
		}
	}
}

// finishSoon gives a child's activity on a host at most childFinish to finish once it
// started, whatever the host's wait: a host that runs it and heartbeats, but never ends it,
// holds its group no longer. (One the host never got is retried sooner, at its heartbeat
// timeout: onHostCtx.)
func finishSoon(ctx workflow.Context, wait time.Duration) workflow.Context {
	return workflow.WithStartToCloseTimeout(ctx, min(wait, childFinish))
}

// childFinish is how long a listing or a write on one host may take once started.
const childFinish = time.Minute

// lostHosts follows the hosts a child's parent says are lost (workflows.HostsLostSignal),
// and reports whether a host is still reachable.
func lostHosts(ctx workflow.Context) (reachable func(host string) bool) {
	lost := map[string]bool{}
	ch := workflow.GetSignalChannel(ctx, workflows.HostsLostSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var hosts []string
		for ch.Receive(ctx, &hosts) {
			for _, host := range hosts {
				lost[host] = true
			}
		}
	})
	return func(host string) bool { return !lost[host] }
}

// WritingWorkflow writes a cluster's files on each of its input's hosts, all at once, each
// with its wait to start and finish and one retry, and reports the hosts where it could
// not, with why. It fails only when its input is not one it can run.
func WritingWorkflow(ctx workflow.Context, in workflows.HostsWritingInput) (workflows.HostsWriting, error) {
	if len(in.Hosts) > workflows.HostsPerChild {
		return workflows.HostsWriting{}, fmt.Errorf("a writing child takes at most %d hosts, not %d", workflows.HostsPerChild, len(in.Hosts))
	}
	byName := make(map[string]workflows.WritingHost, len(in.Hosts))
	names := make([]string, len(in.Hosts))
	for i, h := range in.Hosts {
		byName[h.Name], names[i] = h, h.Name
	}
	w := NewWriter(in.Files, in.Install)
	ctx = flow.WithQuickActivity(ctx, "write files of "+in.Cluster)
	failed := onHosts(ctx, workflows.HostsPerChild, names,
		func(host string) time.Duration { return byName[host].Wait },
		lostHosts(ctx),
		func(ctx workflow.Context, host string) error {
			return w.Write(finishSoon(ctx, byName[host].Wait), byName[host].Install)
		})
	var out workflows.HostsWriting
	for _, host := range slices.Sorted(slices.Values(names)) {
		if err, ok := failed[host]; ok {
			out.Failed = append(out.Failed, workflows.HostFailure{Host: host, Error: flow.ErrorMessage(err)})
		}
	}
	return out, nil
}

// WriteInChildren writes files on hosts through WritingWorkflow children, a group of hosts
// each, adding install for the hosts that need it. It returns the hosts it could not write
// on, with why: a group whose child failed counts all its hosts as failed.
func WriteInChildren(ctx workflow.Context, s *workflows.ClusterState, summary string, hosts []string, pass int,
	files, install backend.ClusterFiles, needsInstall func(host string) bool) map[string]error {
	failed := map[string]error{}
	inChildren(ctx, s, "writing", summary, hosts, pass,
		func(ctx workflow.Context, group []string) workflow.ChildWorkflowFuture {
			in := workflows.HostsWritingInput{Cluster: s.Name, Files: files, Hosts: make([]workflows.WritingHost, len(group))}
			for i, host := range group {
				in.Hosts[i] = workflows.WritingHost{Name: host, Wait: Wait(s, host), Install: needsInstall(host)}
				if in.Hosts[i].Install {
					in.Install = install
				}
			}
			return workflow.ExecuteChildWorkflow(ctx, workflows.HostsWritingWorkflowName, in)
		},
		failed, func(get func(any) error) error {
			var res workflows.HostsWriting
			if err := get(&res); err != nil {
				return err
			}
			for _, h := range res.Failed {
				failed[h.Host] = fmt.Errorf("%s", h.Error)
			}
			return nil
		})
	return failed
}

// Writer writes a cluster's files to hosts, an activity each, adding the startscripts,
// envs and signed specs for a host that lacks them.
//
// Hosts are written to at once, and the writes scheduled in one workflow task must stay
// far under Temporal's 4 MiB: a first write to a host carries the scripts (up to 1 MiB)
// and the envs besides the configmeta. So a write waits while others in flight hold more
// than hostWriteBytes; a write alone always goes.
type Writer struct {
	files, install backend.ClusterFiles
	sizes          map[bool]int
	inFlight       flow.Slots
}

// hostWriteBytes bounds the cluster files in flight to hosts at once.
const hostWriteBytes = 1 << 20

// NewWriter writes files, and install's Scripts, Envs and Signed besides where asked.
func NewWriter(files, install backend.ClusterFiles) *Writer {
	return &Writer{files: files, install: install, sizes: map[bool]int{}, inFlight: flow.Slots{Limit: hostWriteBytes}}
}

// Write writes the files on the host ctx runs activities on, with install if asked.
func (w *Writer) Write(ctx workflow.Context, install bool) error {
	f := w.files
	if install {
		f.Scripts, f.Envs, f.Signed = w.install.Scripts, w.install.Envs, w.install.Signed
	}
	size, ok := w.sizes[install]
	if !ok {
		sized := f
		if !install {
			// Runs from before sized a plain write without its folder key; the sizes decide
			// which writes wait, so the order of their activities in live histories.
			sized.FolderKey = ""
		}
		size = workflows.PayloadSize(sized)
		w.sizes[install] = size
	}
	if err := w.inFlight.Wait(ctx, size, nil); err != nil {
		return err
	}
	w.inFlight.Take(size)
	defer w.inFlight.Give(size)
	return flow.ExecuteActivity(ctx, flow.ActWriteClusterFiles, f).Get(ctx, nil)
}
