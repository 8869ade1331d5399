package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Bounds of actions: those a role declares, and the parameters one run takes (they travel
// in the workflow's history and as the script's arguments).
const (
	MaxActions     = 32
	MaxParams      = 32
	MaxParamsBytes = 4 << 10
)

// checkActions validates a role's declared actions: names as for roles, none an event's.
func checkActions(path string, names []string, ps *problems) []string {
	if len(names) > MaxActions {
		ps.add(path, "%d actions; a role declares at most %d", len(names), MaxActions)
	}
	var actions []string
	for i, name := range names {
		at := fmt.Sprintf("%s[%d]", path, i)
		switch err := CheckName(name); {
		case err != nil:
			ps.add(at, "%v", err)
		case slices.Contains(KnownEvents, Event(name)):
			ps.add(at, "%q is an event's name; an action needs its own", name)
		case slices.Contains(actions, name):
			ps.add(at, "%q is listed twice", name)
		default:
			actions = append(actions, name)
		}
	}
	return actions
}

// HasAction reports whether the role declares the action.
func (r Role) HasAction(name string) bool { return slices.Contains(r.Actions, name) }

// IsActionRun reports whether a run's event is one of the role's actions.
func IsActionRun(action string, event Event) bool {
	return action != "" && string(event) == action && !slices.Contains(KnownEvents, event)
}

// CheckActionCall says why an action's name or parameters cannot be passed to a script:
// each parameter is k=v with k a variable-like name, and they are bounded in number and
// size.
func CheckActionCall(action string, params []string) error {
	if err := CheckName(action); err != nil {
		return fmt.Errorf("action %w", err)
	}
	if slices.Contains(KnownEvents, Event(action)) {
		return fmt.Errorf("action %q is an event's name", action)
	}
	if len(params) > MaxParams {
		return fmt.Errorf("%d parameters; an action takes at most %d", len(params), MaxParams)
	}
	size := 0
	for _, p := range params {
		k, _, ok := strings.Cut(p, "=")
		if !ok || !envName.MatchString(k) {
			return fmt.Errorf("parameter %q is not k=v with k letters, digits and '_'", Clip(p, 64))
		}
		if strings.ContainsRune(p, 0) {
			return fmt.Errorf("parameter %q holds a NUL byte", Clip(p, 64))
		}
		size += len(p)
	}
	if size > MaxParamsBytes {
		return fmt.Errorf("the parameters are %d bytes; at most %d", size, MaxParamsBytes)
	}
	return nil
}
