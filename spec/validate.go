package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ScriptReader loads a startscript by the path written in the spec.
type ScriptReader func(path string) ([]byte, error)

// ErrScriptTooLarge is returned by script readers for files over MaxScriptSize.
var ErrScriptTooLarge = fmt.Errorf("is larger than the %d KiB limit for startscripts", MaxScriptSize>>10)

// Parse decodes and validates a spec, reading its startscripts with readScript. Every problem
// is reported at once in an *apperr.Error with code Invalid and its Problems.
func Parse(data []byte, origin string, readScript ScriptReader) (Cluster, error) {
	var ps problems
	d := decode(data, &ps)
	var c Cluster
	if !d.Malformed {
		c = build(d, origin, readScript, &ps)
	}
	if len(ps) > 0 {
		return Cluster{}, invalid(origin, ps)
	}
	return c, nil
}

func build(d draft, origin string, readScript ScriptReader, ps *problems) Cluster {
	c := Cluster{Origin: origin, Scripts: map[string]string{}}
	if d.Name == nil {
		ps.add("name", "is required")
	} else {
		c.Name = *d.Name
		if err := CheckName(c.Name); err != nil {
			ps.add("name", "%v", err)
		}
	}
	if len(d.Roles) == 0 && !d.RolesMalformed {
		ps.add("roles", "at least one role is required")
	}
	if d.ReconcileEvery != nil {
		c.ReconcileEvery = *d.ReconcileEvery
		if c.ReconcileEvery < MinHealthInterval {
			ps.add("reconcileEvery", "is %s; it must be at least %s", c.ReconcileEvery, MinHealthInterval)
		}
	}
	seen := map[string]int{}
	for i, dr := range d.Roles {
		r := buildRole(fmt.Sprintf("roles[%d]", i), dr, ps)
		if r.Name != "" {
			if first, dup := seen[r.Name]; dup {
				ps.add(fmt.Sprintf("roles[%d].name", i), "%q is already the name of roles[%d]", r.Name, first)
			} else {
				seen[r.Name] = i
			}
		}
		c.Roles = append(c.Roles, r)
	}
	for i, dr := range d.Roles {
		checkDependsOn(fmt.Sprintf("roles[%d].dependsOn", i), c.Roles[i].Name, dr.DependsOn, seen, ps)
	}
	for _, cycle := range Cycles(c.Roles) {
		ps.add("roles", "dependency cycle %s", strings.Join(cycle, " -> "))
	}
	loadScripts(&c, readScript, ps)
	checkLimits(c, ps)
	return c
}

func buildRole(path string, d draftRole, ps *problems) Role {
	r := Role{Cardinality: DefaultCardinality, Events: slices.Clone(AllEvents), Timeout: DefaultTimeout, HeartbeatTimeout: DefaultHeartbeatTimeout, Env: d.Env}
	if d.Name == nil {
		ps.add(path+".name", "is required")
	} else {
		r.Name = *d.Name
		if err := CheckName(r.Name); err != nil {
			ps.add(path+".name", "%v", err)
		}
	}
	if d.Cardinality != nil {
		r.Cardinality = Cardinality(*d.Cardinality)
	}
	min, orMore, cardErr := ParseCardinality(string(r.Cardinality))
	if cardErr != nil {
		ps.add(path+".cardinality", "%v", cardErr)
	}
	switch {
	case d.Members != nil:
		r.Members = *d.Members
	case cardErr == nil:
		r.Members = min // leaving members out asks for the smallest count the role allows
	}
	if r.Members < 0 {
		ps.add(path+".members", "is %d; it must be 0 or more", r.Members)
	} else if cardErr == nil && ((orMore && r.Members < min) || (!orMore && r.Members != min)) {
		ps.add(path+".cardinality", "%q but members is %d", r.Cardinality, r.Members)
	}
	if d.Startscript == nil || *d.Startscript == "" {
		ps.add(path+".startscript", "is required")
	} else {
		r.Startscript = *d.Startscript
	}
	if d.EventsSet {
		r.Events = checkEvents(path+".events", d.Events, ps)
	}
	for _, k := range sortedKeys(d.Env) {
		if err := CheckEnvName(k); err != nil {
			ps.add(path+".env."+k, "%s", err)
		}
	}
	if d.Timeout != nil {
		r.Timeout = *d.Timeout
		if r.Timeout <= 0 {
			ps.add(path+".timeout", "is %s; it must be positive", r.Timeout)
		}
	}
	if d.Heartbeat != nil {
		r.HeartbeatTimeout = *d.Heartbeat
		if r.HeartbeatTimeout < MinHeartbeatTimeout {
			ps.add(path+".heartbeatTimeout", "is %s; it must be at least %s, as agents report every 1-2s", r.HeartbeatTimeout, MinHeartbeatTimeout)
		}
	}
	if d.MaxInFlight != nil {
		r.MaxInFlight = *d.MaxInFlight
		if r.MaxInFlight < 1 {
			ps.add(path+".maxInFlight", "is %d; it must be at least 1 (leave it out to set up all members at once)", r.MaxInFlight)
		}
	}
	r.DependsOn = d.DependsOn
	r.Health = checkHealth(path, d, ps)
	r.Placement = checkPlacement(path+".placement", d.Placement, ps)
	r.Update = checkUpdate(path+".update", d.Update, r, ps)
	r.Actions = checkActions(path+".actions", d.Actions, ps)
	r.ActionParams = checkActionParams(path+".actionParams", d.ActionParams, r.Actions, ps)
	r.Ports = checkPorts(path+".ports", d.Ports, ps)
	r.Limits = checkRoleLimits(path+".limits", d.Limits, ps)
	r.Probe = checkProbe(path+".probe", d.Probe, r, ps)
	r.Container = checkContainer(path, d.Container, r.Ports, ps)
	return r
}

// checkRoleLimits reads a role's limits, each within MinLimits and MaxLimits.
func checkRoleLimits(path string, d *draftLimits, ps *problems) Limits {
	var l Limits
	if d == nil {
		return l
	}
	for _, f := range []struct {
		name                string
		value               *int
		min, max, byDefault int
		to                  *int
	}{
		{"processes", d.Processes, MinLimits.Processes, MaxLimits.Processes, DefaultLimits.Processes, &l.Processes},
		{"openFiles", d.OpenFiles, MinLimits.OpenFiles, MaxLimits.OpenFiles, DefaultLimits.OpenFiles, &l.OpenFiles},
		{"outputMiB", d.OutputMiB, MinLimits.OutputMiB, MaxLimits.OutputMiB, DefaultLimits.OutputMiB, &l.OutputMiB},
	} {
		if f.value == nil {
			continue
		}
		if *f.value < f.min || *f.value > f.max {
			ps.add(path+"."+f.name, "is %d; it must be from %d to %d (leave it out for %d)", *f.value, f.min, f.max, f.byDefault)
			continue
		}
		*f.to = *f.value
	}
	return l
}

// checkPorts reads a role's named ports: lowercase names (they become
// CLUSTERFLOW_PORT_<NAME>), each a port from 1 to 65535, at most MaxRolePorts, no port twice.
func checkPorts(path string, ports map[string]string, ps *problems) map[string]int {
	if len(ports) == 0 {
		return nil
	}
	if len(ports) > MaxRolePorts {
		ps.add(path, "names %d ports; a role has at most %d", len(ports), MaxRolePorts)
	}
	out := map[string]int{}
	seen := map[int]string{}
	for _, name := range sortedKeys(ports) {
		p := path + "." + name
		port, err := strconv.Atoi(ports[name])
		switch {
		case !portName.MatchString(name):
			ps.add(p, "is not a port name (a lowercase letter, then up to 14 lowercase letters or digits)")
		case err != nil || port < 1 || port > 65535:
			ps.add(p, "%q is not a port (1 to 65535)", ports[name])
		case seen[port] != "":
			ps.add(p, "port %d is %s's too", port, seen[port])
		default:
			out[name], seen[port] = port, name
		}
	}
	return out
}

func checkEvents(path string, names []string, ps *problems) []Event {
	var events []Event
	for i, name := range names {
		e := Event(name)
		switch {
		case !slices.Contains(KnownEvents, e):
			ps.add(fmt.Sprintf("%s[%d]", path, i), "unknown event %q (known: %s)", name, EventNames(KnownEvents))
		case slices.Contains(events, e):
			ps.add(fmt.Sprintf("%s[%d]", path, i), "%q is listed twice", name)
		default:
			events = append(events, e)
		}
	}
	return events
}

func checkDependsOn(path, self string, deps []string, roles map[string]int, ps *problems) {
	for i, dep := range deps {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case dep == self:
			ps.add(p, "role %q cannot depend on itself", dep)
		case slices.Contains(deps[:i], dep):
			ps.add(p, "%q is listed twice", dep)
		default:
			if _, ok := roles[dep]; !ok {
				ps.add(path, "unknown role %q", dep)
			}
		}
	}
}

func loadScripts(c *Cluster, readScript ScriptReader, ps *problems) {
	total := 0
	for i, r := range c.Roles {
		if r.Startscript == "" {
			continue
		}
		path := fmt.Sprintf("roles[%d].startscript", i)
		content, err := readScript(r.Startscript)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ps.add(path, "%s: no such file", r.Startscript)
			continue
		case err != nil:
			ps.add(path, "%s: %v", r.Startscript, err)
			continue
		}
		hash := ContentHash(content)
		if _, dup := c.Scripts[hash]; !dup {
			c.Scripts[hash] = string(content)
			total += JSONSize(string(content)) // as it travels: escapes count
		}
		c.Roles[i].ScriptHash = hash
	}
	if total > MaxTotalScriptSize {
		ps.add("roles", "startscripts total %s as JSON text; a cluster's distinct startscripts are limited to %s together", size(total), size(MaxTotalScriptSize))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EventNames writes events as a comma-separated list.
func EventNames(events []Event) string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}
