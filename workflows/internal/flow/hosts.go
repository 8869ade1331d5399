package flow

import (
	"time"

	"github.com/clusterflow/clusterflow/workflows"
	"go.temporal.io/sdk/workflow"
)

// OnMemberHost routes a member's activity to the host holding it, when it has one. A lost
// host's queue is not waited on for ever: the activity fails after a while.
func OnMemberHost(ctx workflow.Context, host string) workflow.Context {
	return OnHost(ctx, host, MemberQueueWait)
}

// OnHost routes an activity to a host's task queue ("": the shared queue of single-host
// mode), waiting at most wait for the host's worker to take it.
func OnHost(ctx workflow.Context, host string, wait time.Duration) workflow.Context {
	if host == "" {
		return ctx
	}
	ctx = workflow.WithTaskQueue(ctx, workflows.HostTaskQueue(workflow.GetInfo(ctx).TaskQueueName, host))
	return workflow.WithScheduleToStartTimeout(ctx, wait)
}

// MemberQueueWait bounds how long a member's activity waits for its host's worker to take
// it: long, as a wide role may queue many at once.
const MemberQueueWait = 5 * time.Minute

// ClientTaskWait bounds how long a client's one-off task (a read of output, a look for
// orphans) waits for the host's worker: a lost host cannot answer, and the client should
// hear so soon.
const ClientTaskWait = 30 * time.Second
