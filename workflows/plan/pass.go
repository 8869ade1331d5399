package plan

import (
	"slices"

	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
)

// Pass is the steps one pass of the executor takes, in order: a step per dependency level
// for tearing down (deepest level first), starting members of restarted hosts, or setting
// members up (shallowest first), and one step for an announcement. The levels are the
// cluster's plan when the pass was made. A step's work is planned when the step is taken
// (Step.Work), from the members as they are then: the steps before it change them, and so
// do changes that arrive while they run (a lost host, a resize).
type Pass struct {
	Steps []Step
}

// Step is one level's share of a pass, or an announcement.
type Step struct {
	Op RoleOperation
	// Level is the level's index in the cluster's plan, and Roles its roles.
	Level int
	Roles []string
	// ReplacedToo makes a teardown take the members being replaced too: they go once
	// their successors are set up.
	ReplacedToo bool
	// Graceful makes a teardown leave the members whose decommission failed: they stay
	// until a retry runs it again (a delete takes them all the same).
	Graceful bool
	// Notice is what an addnodes or delnodes step tells; Told, in runs from before
	// notices, the nodes it names to each member instead.
	Notice *notice.Notice
	Told   *Told
	// Given is work decided before the step (an action's members, a rollout's batch): the
	// step runs it as it is.
	Given []RoleWork
}

// Told is who joined or left, for a notification that names them to each member.
type Told struct {
	Role  string
	Nodes []Member
}

// Removal is the pass that tears down and removes, deepest level first, the members the
// desired spec no longer wants. A delete is the removal toward the empty spec.
func Removal(levels [][]string, replacedToo bool) Pass {
	var p Pass
	for i := len(levels) - 1; i >= 0; i-- {
		p.Steps = append(p.Steps, Step{Op: OpTeardown, Level: i, Roles: levels[i], ReplacedToo: replacedToo})
	}
	return p
}

// GracefulRemoval is Removal with each level's leaving members decommissioned first, in
// the roles that subscribe to decommission: a shrink, a replacement or a drain, never a
// delete (there is nothing left to hand data to).
func GracefulRemoval(levels [][]string, replacedToo bool) Pass {
	var p Pass
	for i := len(levels) - 1; i >= 0; i-- {
		p.Steps = append(p.Steps,
			Step{Op: OpDecommission, Level: i, Roles: levels[i], ReplacedToo: replacedToo, Graceful: true},
			Step{Op: OpTeardown, Level: i, Roles: levels[i], ReplacedToo: replacedToo, Graceful: true})
	}
	return p
}

// Announcement is the pass that tells the members a notice concerns of nodes joining
// (addnodes) or leaving (delnodes): one step, every role at once.
func Announcement(op RoleOperation, n notice.Notice) Pass {
	return Pass{Steps: []Step{{Op: op, Notice: &n}}}
}

// AnnouncementByName is Announcement as runs from before notices make it: the step names,
// to each member, the nodes it is told of.
func AnnouncementByName(op RoleOperation, role string, nodes []Member) Pass {
	return Pass{Steps: []Step{{Op: op, Told: &Told{Role: role, Nodes: nodes}}}}
}

// Given is the pass of one step that runs op on work decided beforehand: an action on the
// members it chose, or a rollout's batch.
func Given(op RoleOperation, work []RoleWork) Pass {
	return Pass{Steps: []Step{{Op: op, Given: work}}}
}

// Restart is the pass that runs start, level by level, on the members of restarted hosts.
func Restart(levels [][]string) Pass { return forward(OpStart, levels) }

// Setup is the pass that sets the pending members up, level by level.
func Setup(levels [][]string) Pass { return forward(OpConfigure, levels) }

func forward(op RoleOperation, levels [][]string) Pass {
	var p Pass
	for i, level := range levels {
		p.Steps = append(p.Steps, Step{Op: op, Level: i, Roles: level})
	}
	return p
}

// Work is what the step does now: the members to forget (never created, so there is
// nothing to tear down) and each role's work. restarted names the restarted hosts, for a
// start step.
func (s Step) Work(desired spec.Cluster, roles []RoleState, restarted []string) (forget []string, work []RoleWork) {
	if s.Given != nil {
		return nil, s.Given
	}
	switch s.Op {
	case OpTeardown:
		return removal(desired, roles, s.Roles, s.ReplacedToo, s.Graceful)
	case OpDecommission:
		return nil, decommission(desired, roles, s.Roles, s.ReplacedToo)
	case OpStart:
		return nil, start(desired, roles, s.Roles, restarted)
	case OpConfigure:
		return nil, configure(desired, roles, s.Roles)
	case OpAddNodes, OpDelNodes, OpRemoving:
		if s.Notice != nil {
			return nil, Notice(desired, roles, *s.Notice)
		}
		return nil, Notification(desired, roles, s.Op, s.Told.Role, s.Told.Nodes)
	}
	return nil, nil
}

// Joined are the role's members that are ready and not yet announced to the others.
func Joined(rs RoleState) []Member {
	var joined []Member
	for _, m := range rs.Members {
		if m.State == MemberReady && !m.Announced {
			joined = append(joined, m)
		}
	}
	return joined
}

// Levels are the desired spec's dependency levels, with any role still winding down after
// an apply removed it placed last, so that a removal still reaches it.
func Levels(desired spec.Cluster, roles []RoleState) ([][]string, error) {
	levels, err := spec.Levels(desired.Roles)
	if err != nil {
		return nil, err
	}
	var leftover []string
	for _, rs := range roles {
		if LevelOf(levels, rs.Name) < 0 {
			leftover = append(leftover, rs.Name)
		}
	}
	if len(leftover) > 0 {
		slices.Sort(leftover)
		if len(levels) == 0 {
			levels = append(levels, nil)
		}
		levels[len(levels)-1] = append(levels[len(levels)-1], leftover...)
	}
	return levels, nil
}

// LevelOf is the index of the level holding role, or -1.
func LevelOf(levels [][]string, role string) int {
	for i, level := range levels {
		if slices.Contains(level, role) {
			return i
		}
	}
	return -1
}
