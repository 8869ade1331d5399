package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// draft is a spec as written: fields are pointers or nil slices so that "left out" can be
// told apart from "set to zero" when defaults are applied.
type draft struct {
	Name           *string
	ReconcileEvery *time.Duration
	Roles          []draftRole
	// Malformed marks a document too broken to check further.
	Malformed bool
	// RolesMalformed marks a roles field that is not a list (already reported).
	RolesMalformed bool
}

type draftRole struct {
	Name        *string
	Members     *int
	Cardinality *string
	Startscript *string
	Events      []string
	EventsSet   bool
	Env         map[string]string
	Timeout     *time.Duration
	Heartbeat   *time.Duration
	MaxInFlight *int
	DependsOn   []string
	// Health policy.
	ReplaceAfter         *time.Duration
	FlapLimit            *int
	FlapWindow           *time.Duration
	MaxUnavailable       *string
	ReplaceOnConfigError *bool
	MaxReplacements      *int
	Placement            *draftPlacement
	Update               *draftUpdate
	Actions              []string
	Ports                map[string]string
	Limits               *draftLimits
	Probe                *draftProbe
	Container            draftContainer
	ActionParams         map[string]map[string]string
}

type draftLimits struct{ Processes, OpenFiles, OutputMiB *int }

// decode walks the YAML tree by hand rather than unmarshalling into structs, so that every
// problem (an unknown key, a wrong type) is reported with its field path, and all at once.
func decode(data []byte, ps *problems) draft {
	var d draft
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		ps.add("spec", "not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		d.Malformed = true
		return d
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		ps.add("spec", "is empty")
		d.Malformed = true
		return d
	}
	w := walker{ps: ps}
	w.mapping("", root.Content[0], map[string]func(string, *yaml.Node){
		"name":           func(p string, n *yaml.Node) { d.Name = w.str(p, n) },
		"reconcileEvery": func(p string, n *yaml.Node) { d.ReconcileEvery = w.duration(p, n) },
		"roles": func(p string, n *yaml.Node) {
			d.RolesMalformed = !w.sequence(p, n, func(p string, n *yaml.Node) { d.Roles = append(d.Roles, w.role(p, n)) })
		},
	})
	return d
}

type walker struct{ ps *problems }

func (w walker) role(path string, n *yaml.Node) draftRole {
	var r draftRole
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"name":                 func(p string, n *yaml.Node) { r.Name = w.str(p, n) },
		"members":              func(p string, n *yaml.Node) { r.Members = w.integer(p, n) },
		"cardinality":          func(p string, n *yaml.Node) { r.Cardinality = w.str(p, n) },
		"startscript":          func(p string, n *yaml.Node) { r.Startscript = w.str(p, n) },
		"events":               func(p string, n *yaml.Node) { r.Events, r.EventsSet = w.strings(p, n), true },
		"env":                  func(p string, n *yaml.Node) { r.Env = w.envMap(p, n) },
		"timeout":              func(p string, n *yaml.Node) { r.Timeout = w.duration(p, n) },
		"heartbeatTimeout":     func(p string, n *yaml.Node) { r.Heartbeat = w.duration(p, n) },
		"maxInFlight":          func(p string, n *yaml.Node) { r.MaxInFlight = w.integer(p, n) },
		"dependsOn":            func(p string, n *yaml.Node) { r.DependsOn = w.strings(p, n) },
		"replaceAfter":         func(p string, n *yaml.Node) { r.ReplaceAfter = w.duration(p, n) },
		"flapLimit":            func(p string, n *yaml.Node) { r.FlapLimit = w.integer(p, n) },
		"flapWindow":           func(p string, n *yaml.Node) { r.FlapWindow = w.duration(p, n) },
		"maxUnavailable":       func(p string, n *yaml.Node) { r.MaxUnavailable = w.str(p, n) },
		"replaceOnConfigError": func(p string, n *yaml.Node) { r.ReplaceOnConfigError = w.boolean(p, n) },
		"maxReplacements":      func(p string, n *yaml.Node) { r.MaxReplacements = w.integer(p, n) },
		"placement":            func(p string, n *yaml.Node) { r.Placement = w.placement(p, n) },
		"update":               func(p string, n *yaml.Node) { r.Update = w.update(p, n) },
		"actions":              func(p string, n *yaml.Node) { r.Actions = w.strings(p, n) },
		"ports":                func(p string, n *yaml.Node) { r.Ports = w.stringMap(p, n) },
		"limits":               func(p string, n *yaml.Node) { r.Limits = w.limits(p, n) },
		"probe":                func(p string, n *yaml.Node) { r.Probe = w.probe(p, n) },
		"image":                func(p string, n *yaml.Node) { r.Container.Image = w.str(p, n) },
		"user":                 func(p string, n *yaml.Node) { r.Container.User = w.str(p, n) },
		"resources":            func(p string, n *yaml.Node) { r.Container.Resources = w.resources(p, n) },
		"volumes":              func(p string, n *yaml.Node) { r.Container.Volumes = w.strings(p, n) },
		"publish":              func(p string, n *yaml.Node) { r.Container.Publish = w.strings(p, n) },
		"privileged":           func(p string, n *yaml.Node) { r.Container.Privileged = w.boolean(p, n) },
		"actionParams": func(p string, n *yaml.Node) {
			r.ActionParams = map[string]map[string]string{}
			for _, kv := range pairs(deref(n)) {
				if params := w.stringMap(join(p, kv.key), kv.value); params != nil {
					r.ActionParams[kv.key] = params
				}
			}
		},
	})
	return r
}

func (w walker) limits(path string, n *yaml.Node) *draftLimits {
	l := &draftLimits{}
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"processes": func(p string, n *yaml.Node) { l.Processes = w.integer(p, n) },
		"openFiles": func(p string, n *yaml.Node) { l.OpenFiles = w.integer(p, n) },
		"outputMiB": func(p string, n *yaml.Node) { l.OutputMiB = w.integer(p, n) },
	})
	return l
}

func (w walker) placement(path string, n *yaml.Node) *draftPlacement {
	p := &draftPlacement{}
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"hosts":      func(p2 string, n *yaml.Node) { p.Hosts = w.stringMap(p2, n) },
		"maxPerHost": func(p2 string, n *yaml.Node) { p.MaxPerHost = w.integer(p2, n) },
		"spreadBy":   func(p2 string, n *yaml.Node) { p.SpreadBy = w.str(p2, n) },
	})
	return p
}

func (w walker) mapping(path string, n *yaml.Node, fields map[string]func(string, *yaml.Node)) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		w.ps.add(orSpec(path), "must be a mapping of fields, got %s", describe(n))
		return
	}
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	for _, kv := range pairs(n) {
		key, value := kv.key, kv.value
		p := join(path, key)
		handle, ok := fields[key]
		if !ok && path == "" && strings.HasPrefix(key, "x-") {
			continue // an extension field, as in Compose files: a place to keep anchors
		}
		if !ok {
			w.ps.add(p, "unknown field%s", suggest(key, known))
			continue
		}
		if value.Tag == "!!null" {
			continue // "key:" with no value means the same as leaving it out
		}
		handle(p, value)
	}
}

func (w walker) sequence(path string, n *yaml.Node, each func(string, *yaml.Node)) bool {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		w.ps.add(path, "must be a list, got %s", describe(n))
		return false
	}
	for i, item := range n.Content {
		each(fmt.Sprintf("%s[%d]", path, i), deref(item))
	}
	return true
}

func (w walker) str(path string, n *yaml.Node) *string {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		w.ps.add(path, "must be a single value, got %s", describe(n))
		return nil
	}
	return &n.Value
}

func (w walker) integer(path string, n *yaml.Node) *int {
	s := w.str(path, n)
	if s == nil {
		return nil
	}
	v, err := strconv.Atoi(*s)
	if err != nil || deref(n).Tag != "!!int" {
		w.ps.add(path, "%q is not a whole number", *s)
		return nil
	}
	return &v
}

func (w walker) boolean(path string, n *yaml.Node) *bool {
	s := w.str(path, n)
	if s == nil {
		return nil
	}
	v, err := strconv.ParseBool(*s)
	if err != nil || deref(n).Tag != "!!bool" {
		w.ps.add(path, "%q is not true or false", *s)
		return nil
	}
	return &v
}

func (w walker) duration(path string, n *yaml.Node) *time.Duration {
	s := w.str(path, n)
	if s == nil {
		return nil
	}
	v, err := time.ParseDuration(*s)
	if err != nil {
		w.ps.add(path, "%q is not a duration (write e.g. 90s, 10m or 1h30m)", *s)
		return nil
	}
	return &v
}

func (w walker) strings(path string, n *yaml.Node) []string {
	out := []string{}
	w.sequence(path, n, func(p string, item *yaml.Node) {
		if s := w.str(p, item); s != nil {
			out = append(out, *s)
		}
	})
	return out
}

func (w walker) stringMap(path string, n *yaml.Node) map[string]string {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		w.ps.add(path, "must be a mapping of NAME: value, got %s", describe(n))
		return nil
	}
	out := map[string]string{}
	for _, kv := range pairs(n) {
		key, value := kv.key, kv.value
		if s := w.str(join(path, key), value); s != nil {
			out[key] = *s
		}
	}
	return out
}

// envMap reads a role's env: NAME: value, or NAME: {fromFile: F} / {fromEnv: N} for a
// secret the host fills in (kept as SecretRef.Encode).
func (w walker) envMap(path string, n *yaml.Node) map[string]string {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		w.ps.add(path, "must be a mapping of NAME: value, got %s", describe(n))
		return nil
	}
	out := map[string]string{}
	for _, kv := range pairs(n) {
		key, value := kv.key, kv.value
		p := join(path, key)
		if value.Kind != yaml.MappingNode {
			if s := w.str(p, value); s != nil {
				if strings.ContainsRune(*s, 0) {
					w.ps.add(p, "contains a NUL byte")
					continue
				}
				out[key] = *s
			}
			continue
		}
		var ref SecretRef
		w.mapping(p, value, map[string]func(string, *yaml.Node){
			"fromFile": func(p2 string, n *yaml.Node) {
				if s := w.str(p2, n); s != nil {
					ref.FromFile = *s
				}
			},
			"fromEnv": func(p2 string, n *yaml.Node) {
				if s := w.str(p2, n); s != nil {
					ref.FromEnv = *s
				}
			},
		})
		if err := ref.Check(); err != nil {
			w.ps.add(p, "%s", err)
			continue
		}
		out[key] = ref.Encode()
	}
	return out
}

// deref follows an alias (*name) to the node its anchor (&name) marks. Aliases are
// followed where they are read, never copied, so a spec of aliases to aliases costs no
// more to read than it is long, and this schema has no list of lists to blow up.
func deref(n *yaml.Node) *yaml.Node {
	for hops := 0; n.Kind == yaml.AliasNode && n.Alias != nil && hops < 8; hops++ {
		n = n.Alias
	}
	return n
}

type pair struct {
	key   string
	value *yaml.Node
}

// pairs is a mapping's keys and values, aliases followed, with YAML's merge key
// ("<<: *defaults", or a list of them) folded in: a key written in the mapping wins over a
// merged one, and an earlier merged mapping over a later one.
func pairs(n *yaml.Node) []pair {
	var own, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], deref(n.Content[i+1])
		if key.Value == "<<" && key.Tag == "!!merge" {
			sources := []*yaml.Node{value}
			if value.Kind == yaml.SequenceNode {
				sources = value.Content
			}
			for _, src := range sources {
				if src = deref(src); src.Kind == yaml.MappingNode {
					for j := 0; j+1 < len(src.Content); j += 2 {
						merged = append(merged, pair{src.Content[j].Value, deref(src.Content[j+1])})
					}
				}
			}
			continue
		}
		own = append(own, pair{key.Value, value})
		seen[key.Value] = true
	}
	for _, kv := range merged {
		if !seen[kv.key] {
			seen[kv.key] = true
			own = append(own, kv)
		}
	}
	return own
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orSpec(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

// suggest names the known field a typo most likely meant.
func suggest(key string, known []string) string {
	best, bestDistance := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDistance || (d == bestDistance && k < best) {
			best, bestDistance = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
