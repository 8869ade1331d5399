package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Levels plans roles into dependency levels: level 0 holds roles with no dependencies, and
// each later level holds roles whose dependencies all sit in earlier levels. A role's level
// is one more than its deepest dependency. Names within a level are sorted, so the plan is
// the same on every replay whatever order the spec listed roles in.
func Levels(roles []Role) ([][]string, error) {
	deps := dependencyMap(roles)
	level := map[string]int{}
	var visit func(name string, path []string) (int, error)
	visit = func(name string, path []string) (int, error) {
		if l, done := level[name]; done {
			return l, nil
		}
		if slices.Contains(path, name) {
			return 0, fmt.Errorf("dependency cycle %s", strings.Join(append(path, name), " -> "))
		}
		l := 0
		for _, dep := range deps[name] {
			if _, known := deps[dep]; !known {
				return 0, fmt.Errorf("role %q depends on unknown role %q", name, dep)
			}
			dl, err := visit(dep, append(path, name))
			if err != nil {
				return 0, err
			}
			l = max(l, dl+1)
		}
		level[name] = l
		return l, nil
	}
	var levels [][]string
	for _, name := range sortedKeys(deps) {
		l, err := visit(name, nil)
		if err != nil {
			return nil, err
		}
		for len(levels) <= l {
			levels = append(levels, nil)
		}
		levels[l] = append(levels[l], name) // names arrive sorted, so each level stays sorted
	}
	return levels, nil
}

// Cycles lists each dependency cycle once, as a path that starts and ends at the cycle's
// alphabetically first role, e.g. [a b a]. Unknown roles and self-dependencies are left to
// other checks.
func Cycles(roles []Role) [][]string {
	deps := dependencyMap(roles)
	const (
		unvisited = iota
		onStack
		finished
	)
	state := map[string]int{}
	seen := map[string]bool{}
	var cycles [][]string
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = onStack
		stack = append(stack, name)
		for _, dep := range deps[name] {
			if _, known := deps[dep]; !known || dep == name {
				continue
			}
			switch state[dep] {
			case unvisited:
				visit(dep)
			case onStack:
				cycle := rotateToSmallest(stack[slices.Index(stack, dep):])
				if key := strings.Join(cycle, ">"); !seen[key] {
					seen[key] = true
					cycles = append(cycles, append(cycle, cycle[0]))
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = finished
	}
	for _, name := range sortedKeys(deps) {
		if state[name] == unvisited {
			visit(name)
		}
	}
	return cycles
}

func dependencyMap(roles []Role) map[string][]string {
	deps := make(map[string][]string, len(roles))
	for _, r := range roles {
		if r.Name == "" {
			continue
		}
		sorted := slices.Clone(r.DependsOn)
		slices.Sort(sorted)
		deps[r.Name] = slices.Compact(sorted)
	}
	return deps
}

func rotateToSmallest(cycle []string) []string {
	i := slices.Index(cycle, slices.Min(cycle))
	return append(slices.Clone(cycle[i:]), cycle[:i]...)
}
