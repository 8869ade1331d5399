package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// announce tells ready members about members that left (delnodes), then about members
// that joined (addnodes), one role's group at a time. Members that joined learnt about
// everyone from configmeta when they configured, so none of them is told about any other.
// Groups not yet announced stay queued if a cancel or delete interrupts.
func (w *clusterWorkflow) announce(ctx workflow.Context) {
	for len(w.unannounced.Removed) > 0 && ctx.Err() == nil {
		w.notify(ctx, OpDelNodes, w.unannounced.Removed[0])
		if ctx.Err() == nil {
			w.unannounced.Removed = w.unannounced.Removed[1:]
		}
	}
	// Added groups leave the queue only at the end, so that isAdded keeps every newcomer
	// out of the recipients throughout.
	done := 0
	for ; done < len(w.unannounced.Added) && ctx.Err() == nil; done++ {
		w.notify(ctx, OpAddNodes, w.unannounced.Added[done])
	}
	if ctx.Err() != nil {
		done-- // the group that was interrupted is announced again next time
	}
	w.unannounced.Added = w.unannounced.Added[max(done, 0):]
}

// notify runs the event on every ready member subscribed to it, a child workflow per role,
// all roles at once. A failing notification puts its member in config_error; it is not
// retried.
func (w *clusterWorkflow) notify(ctx workflow.Context, op RoleOperation, group NodeGroup) {
	event := spec.Event(op)
	var roles []string
	var futures []workflow.ChildWorkflowFuture
	for _, rs := range w.state.Roles {
		r, ok := w.spec.Role(rs.Name)
		if !ok || !r.Wants(event) {
			continue
		}
		var recipients []Member
		for _, m := range rs.Members {
			if m.State == MemberReady && !(op == OpAddNodes && w.unannounced.isAdded(m.Name)) {
				recipients = append(recipients, m)
			}
		}
		if len(recipients) > 0 {
			roles = append(roles, rs.Name)
			futures = append(futures, w.startRole(ctx, op, rs.Name, recipients, &group))
		}
	}
	if len(futures) == 0 {
		return
	}
	w.touch(ctx)
	for i, f := range futures {
		w.finishRole(ctx, roles[i], f)
	}
	w.logger.Info("Announced membership change", "Event", event, "Role", group.Role, "Nodes", fmt.Sprint(group.Nodes), "Roles", fmt.Sprint(roles))
}
