package spec

import (
	"fmt"
	"regexp"
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

// checkActionParams validates a role's parameter schemas: each for a declared action, each
// parameter a variable-like name with a pattern that compiles, at most MaxParams an action.
func checkActionParams(path string, schemas map[string]map[string]string, actions []string, ps *problems) map[string]map[string]string {
	if len(schemas) == 0 {
		return nil
	}
	out := map[string]map[string]string{}
	for _, action := range sortedKeys(schemas) {
		at := path + "." + action
		if !slices.Contains(actions, action) {
			ps.add(at, "%q is not one of the role's actions", action)
			continue
		}
		params := schemas[action]
		if len(params) > MaxParams {
			ps.add(at, "names %d parameters; an action takes at most %d", len(params), MaxParams)
			continue
		}
		for _, name := range sortedKeys(params) {
			if !envName.MatchString(name) {
				ps.add(at+"."+name, "is not a parameter name (letters, digits and '_', not starting with a digit)")
			} else if _, err := paramPattern(params[name]); err != nil {
				ps.add(at+"."+name, "pattern %q: %v", Clip(params[name], 64), err)
			}
		}
		out[action] = params
	}
	return out
}

// paramPattern compiles a parameter's pattern to match the whole value.
func paramPattern(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > 256 {
		return nil, fmt.Errorf("is %d bytes; at most 256", len(pattern))
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// CheckActionParams says why params do not fit the action's schema, when it has one: each
// must be a parameter the schema names, its value matching its pattern.
func CheckActionParams(schema map[string]string, action string, params []string) error {
	if schema == nil {
		return nil
	}
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		pattern, ok := schema[k]
		if !ok {
			takes := strings.Join(sortedKeys(schema), ", ")
			if takes == "" {
				takes = "none"
			}
			return fmt.Errorf("action %s takes no parameter %q (it takes %s)", action, k, takes)
		}
		re, err := paramPattern(pattern)
		if err != nil || !re.MatchString(v) {
			return fmt.Errorf("action %s: parameter %s=%q does not match %q", action, k, Clip(v, 64), pattern)
		}
	}
	return nil
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
