package render

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

func wideStatus(members, failed int) workflows.ClusterStatus {
	role := workflows.RoleStatus{Name: "worker", Desired: members, MemberCount: members}
	for i := range members {
		m := workflows.MemberStatus{Name: fmt.Sprintf("big-worker-%d", i), State: workflows.MemberReady}
		if i >= members-failed {
			m.State, m.Detail, m.StderrTail = workflows.MemberConfigError, "configure: exit 1", fmt.Sprintf("no disk on %d\n", i)
		}
		role.Members = append(role.Members, m)
	}
	return workflows.ClusterStatus{Name: "big", Phase: workflows.PhaseFailed, Roles: []workflows.RoleStatus{role}}
}

func TestALargeClusterListsOnlyTheFirstMembersNotReady(t *testing.T) {
	var out bytes.Buffer
	Status(&out, wideStatus(3000, 25), time.Now(), false)
	text := out.String()
	if n := memberRows(text); n != 20 {
		t.Errorf("%d members listed, want the first 20 not ready:\n%s", n, text)
	}
	if strings.Contains(text, "big-worker-0 ") {
		t.Errorf("a ready member is listed")
	}
	if !strings.Contains(text, "… and 5 more not ready; 2975 of 3000 members ready") {
		t.Errorf("no summary line:\n%s", text)
	}
	if !strings.Contains(text, "no disk on 2975") || strings.Contains(text, "no disk on 2999") {
		t.Errorf("want the tails of the listed failures only")
	}

	out.Reset()
	Status(&out, wideStatus(3000, 25), time.Now(), true)
	if n := memberRows(out.String()); n != 3000 {
		t.Errorf("--members listed %d members, want 3000", n)
	}
}

// A failure among thousands of members still being set up is listed before them.
func TestALargeClusterListsItsFailuresBeforeMembersStillPending(t *testing.T) {
	s := wideStatus(3000, 1)
	for i := range 2500 {
		s.Roles[0].Members[i].State = workflows.MemberPending
	}
	var out bytes.Buffer
	Status(&out, s, time.Now(), false)
	text := out.String()
	rows := strings.Split(text, "\n")
	first := slices.IndexFunc(rows, func(l string) bool { return strings.HasPrefix(l, "big-worker-") })
	if first < 0 || !strings.HasPrefix(rows[first], "big-worker-2999 ") || !strings.Contains(text, "no disk on 2999") {
		t.Errorf("the failure should come first, with its output:\n%s", text)
	}
	if !strings.Contains(text, "… and 2481 more not ready; 499 of 3000 members ready") {
		t.Errorf("no summary line:\n%s", text)
	}
}

func TestASmallClusterListsEveryMember(t *testing.T) {
	var out bytes.Buffer
	Status(&out, wideStatus(50, 0), time.Now(), false)
	if n := memberRows(out.String()); n != 50 {
		t.Errorf("listed %d of 50 members", n)
	}
}

// memberRows counts the rows of the member table.
func memberRows(text string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "big-worker-") && (f[1] == "ready" || f[1] == "config_error") {
			n++
		}
	}
	return n
}
