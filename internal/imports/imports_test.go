// Package imports holds the test of the import rules that keep clusterflow's seams honest:
// the contributor guide (docs/contributing.md) draws them.
package imports

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/clusterflow/clusterflow"

// never lists, for a package, the packages it must not depend on, directly or through
// another: a prefix ending in "/" stands for every package under it, on either side (a
// from of "workflows/" holds for workflows itself and every package under it).
var never = []struct {
	from string
	not  []string
	why  string
}{
	{"starter", []string{"activities", "internal/backend/", "internal/agent", "internal/runner", "internal/devserver", "worker"},
		"the client library talks to Temporal only: it runs no side effects and knows no substrate beyond the seam's types"},
	{"worker", []string{"starter"}, "a worker registers its host through the workflows' contract, not the client library"},
	{"workflows/", []string{"activities", "internal/agent", "internal/runner", "internal/devserver", "internal/backend/local"},
		"workflows are deterministic code that names activities by contract, never their implementation"},
	{"workflows", []string{"workflows/cluster", "workflows/role", "workflows/health", "workflows/hosts", "workflows/rollout", "workflows/details", "workflows/announce", "workflows/maintenance", "workflows/internal/"},
		"workflows/ itself is the contract (names, inputs, the types in histories) that every concept and client shares"},
	{"workflows/role", []string{"workflows/cluster"}, "a concept reaches the entity only through the interface it declares (role.Cluster)"},
	{"workflows/health", []string{"workflows/cluster", "workflows/rollout", "workflows/announce"}, "a concept reaches the entity only through the interface it declares (health.Cluster), which also tells a rollout's gate of reports"},
	{"workflows/hosts", []string{"workflows/cluster", "workflows/health"}, "a concept reaches the entity only through the interface it declares (hosts.Cluster), which feeds health for it"},
	{"workflows/rollout", []string{"workflows/cluster", "workflows/health"}, "a concept reaches the entity only through the interface it declares (rollout.Cluster)"},
	{"workflows/announce", []string{"workflows/cluster", "workflows/role", "workflows/health", "workflows/rollout"}, "a concept reaches the entity only through the interface it declares (announce.Cluster), whose steps the executor runs"},
	{"workflows/maintenance", []string{"workflows/cluster"}, "the fleet's maintenance flag tells clusters by signal, never by code"},
	{"workflows/plan", []string{"go.temporal.io/", "workflows/cluster", "workflows/role", "workflows/health", "workflows/hosts", "workflows/rollout", "workflows/announce"},
		"the planner is pure: a table test runs it without a workflow context"},
	{"activities", []string{"internal/backend/local", "internal/agent", "internal/runner"},
		"activities reach members through the backend seam only"},
	{"cmd/clusterflow", []string{"internal/devserver", "go.temporal.io/server/", "github.com/temporalio/ui-server/"},
		"every command but dev starts without the embedded server's packages; dev runs cmd/clusterflow-dev"},
	{"cmd/clusterflow-host", []string{"internal/devserver", "go.temporal.io/server/", "github.com/temporalio/ui-server/"},
		"a fleet's hosts run no embedded server"},
	{"internal/backend", []string{"internal/backend/local", "internal/agent", "internal/runner", "go.temporal.io/"},
		"the seam is neutral types and interfaces: any substrate implements it"},
}

// listed is what go list says of a package, as far as these tests ask.
type listed struct {
	ImportPath, Dir, Export string
	GoFiles, Deps           []string
}

// goList runs go list -json=FIELDS with args, from the module's root.
func goList(t *testing.T, fields string, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=" + fields}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var found []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			return found
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		found = append(found, p)
	}
}

// deps lists every package of the module with what it depends on (go list -deps).
func deps(t *testing.T) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	for _, p := range goList(t, "ImportPath,Deps", module+"/...") {
		found[p.ImportPath] = p.Deps
	}
	return found
}

func matches(dep, rule string) bool {
	if strings.HasSuffix(rule, "/") {
		return strings.HasPrefix(dep, rule)
	}
	if !strings.Contains(rule, ".") {
		rule = module + "/" + rule
	}
	return dep == rule || strings.HasPrefix(dep, rule+"/")
}

func TestNeverArrows(t *testing.T) {
	all := deps(t)
	for _, rule := range never {
		froms := []string{module + "/" + rule.from}
		if prefix, ok := strings.CutSuffix(rule.from, "/"); ok {
			froms = nil
			for pkg := range all {
				if pkg == module+"/"+prefix || strings.HasPrefix(pkg, module+"/"+rule.from) {
					froms = append(froms, pkg)
				}
			}
		}
		if len(froms) == 0 {
			t.Errorf("no package is under %s; the rule %q has nothing to hold", rule.from, rule.why)
		}
		for _, from := range froms {
			checkRule(t, all, from, rule.not, rule.why)
		}
	}
}

func checkRule(t *testing.T, all map[string][]string, from string, nots []string, why string) {
	t.Helper()
	got, ok := all[from]
	if !ok {
		t.Errorf("package %s does not exist; the rule %q has nothing to hold", strings.TrimPrefix(from, module+"/"), why)
		return
	}
	for _, not := range nots {
		// A rule about the seam's own kind ("internal/backend") does not forbid the seam
		// itself.
		if matches(from, not) {
			continue
		}
		var through []string
		for _, dep := range got {
			if matches(dep, not) {
				through = append(through, strings.TrimPrefix(dep, module+"/"))
			}
		}
		if len(through) > 0 {
			t.Errorf("%s depends on %s (%s): never, because %s", strings.TrimPrefix(from, module+"/"), not, strings.Join(through[:min(3, len(through))], ", "), why)
		}
	}
}
