package workflows

import (
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
)

// Summary is the one line the Web UI shows for a cluster, e.g.
// "analytics: 3 roles, 7 members (controller → worker → edge)".
func Summary(c spec.Cluster) string {
	levels, err := spec.Levels(c.Roles)
	plan := make([]string, 0, len(levels))
	for _, level := range levels {
		plan = append(plan, strings.Join(level, ", "))
	}
	text := fmt.Sprintf("%s: %d %s, %d %s", c.Name, len(c.Roles), plural(len(c.Roles), "role"), c.TotalMembers(), plural(c.TotalMembers(), "member"))
	if err == nil {
		text += " (" + strings.Join(plan, " → ") + ")"
	}
	return text
}

// roleDetails is the Markdown the Web UI shows on a role operation's page.
func roleDetails(op RoleOperation, r spec.Role, members []Member, nodes *NodeGroup, notice *NoticeRef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** of role **%s**, startscript `%s`", op, r.Name, r.Startscript)
	if len(r.DependsOn) > 0 {
		fmt.Fprintf(&b, ", after %s", strings.Join(r.DependsOn, ", "))
	}
	switch {
	case notice != nil:
		fmt.Fprintf(&b, "\n\nNodes of role **%s**, as notice %d says; each member's host works out the ones it is told of", notice.Role, notice.ID)
	case nodes != nil:
		fmt.Fprintf(&b, "\n\nNodes of role **%s**: %s", nodes.Role, spec.Some(nodes.Nodes, 20))
	}
	b.WriteString("\n\nMembers:")
	for _, m := range members {
		fmt.Fprintf(&b, " `%s`", m.Name)
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// canceledMessage sums up what a cancel left behind.
func (c *cluster) canceledMessage() string {
	canceled, notStarted := 0, 0
	for _, r := range c.state.Roles {
		for _, m := range r.Members {
			switch {
			case m.State == MemberConfigError && m.Detail == "canceled":
				canceled++
			case m.State == MemberPending:
				notStarted++
			}
		}
	}
	return fmt.Sprintf("stopped at generation %d by a cancel: %d %s canceled, %d not started", c.state.Generation, canceled, plural(canceled, "member"), notStarted)
}
