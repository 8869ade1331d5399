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
	text := fmt.Sprintf("%s: %d %s, %d %s", c.Name, len(c.Roles), Plural(len(c.Roles), "role"), c.TotalMembers(), Plural(c.TotalMembers(), "member"))
	if err == nil {
		text += " (" + strings.Join(plan, " → ") + ")"
	}
	return text
}

// Plural is word, with an s unless n is 1.
func Plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
