package workflows

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/status.golden.json from the code")

// The status JSON is what users script against: its shape is pinned by a golden file, so a
// change to it is a deliberate act (run `go test ./workflows -run TestStatusShape -update`,
// and bump StatusAPIVersion if scripts must adapt). The workflow's bookkeeping stays out.
func TestStatusShape(t *testing.T) {
	got, err := json.MarshalIndent(exampleState().Status(nil, QueryStatusBytes), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "status.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the status JSON changed shape; if that is meant, run with -update, document it in docs/reference.md and consider StatusAPIVersion.\ngot:\n%s\nwant:\n%s", got, want)
	}
	for _, bookkeeping := range []string{"operations", "configMetaVersion", "listedIn", "knowsUpTo", "announced", "unlistedFrom"} {
		if bytes.Contains(got, []byte(`"`+bookkeeping+`"`)) {
			t.Errorf("bookkeeping field %q leaks into the status", bookkeeping)
		}
	}
}

// exampleState has a member of every kind the status shows.
func exampleState() ClusterState {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return ClusterState{
		Name: "demo", Home: "0123456789ab", Phase: PhaseDegraded, Message: "1 of 2 workers down", Origin: "cluster.yaml",
		Levels: [][]string{{"controller"}, {"worker"}}, CreatedAt: at, UpdatedAt: at.Add(time.Minute),
		Operations: 3, Generation: 3, AttemptedGeneration: 3, ReachedGeneration: 2, ConfigMetaVersion: 7,
		Signatures: []GenerationSignature{{Generation: 3}, {Generation: 2, Key: "ops"}},
		Roles: []plan.RoleState{
			{Name: "controller", Level: 0, Desired: 1, Members: []Member{
				{Name: "demo-controller-0", Role: "controller", State: MemberReady, Event: "configure", Since: at, ListedIn: 1, KnowsUpTo: 1, Announced: true},
			}},
			{Name: "worker", Level: 1, DependsOn: []string{"controller"}, Desired: 2, Paused: "2 of 2 members unavailable", Resumed: true, Members: []Member{
				{
					Name: "demo-worker-0", Role: "worker", State: MemberDown, Detail: "down: disk full", Event: "configure", Since: at,
					ListedIn: 1, KnowsUpTo: 1, UnlistedFrom: 4, Replacements: 1,
					Health: &MemberHealth{LastReport: HealthDown, Due: at.Add(5 * time.Minute), Recoveries: []time.Time{at},
						Transitions: []HealthTransition{{At: at, From: MemberReady, To: MemberDown, Event: HealthDown, Reason: "disk full", Source: "nagios", ReportedAt: at}},
						LastCheck:   &spec.ProbeCheck{Host: "h1", At: at, Result: "exited with status 1", Output: "disk full", InARow: 3}},
				},
				{
					Name: "demo-worker-2", Role: "worker", Ordinal: 2, State: MemberConfigError, Detail: "exit 3", Event: "configure", Since: at,
					LastLine: "starting", StdoutTail: "out", StderrTail: "err", Leaving: true, Replaces: "demo-worker-1", ReplacedBy: "demo-worker-3",
				},
			}},
		},
	}
}

// A status put together from pages of one member is the whole status.
func TestStatusPagesAddUpToTheWhole(t *testing.T) {
	state := exampleState()
	whole := state.Status(nil, QueryStatusBytes)
	paged := state.Status(&StatusPage{From: 0, Limit: 1}, QueryStatusBytes)
	if n := len(paged.Role("controller").Members) + len(paged.Role("worker").Members); n != 1 {
		t.Fatalf("the first page of 1 holds %d members", n)
	}
	for from := 1; from < paged.MemberCount(); from++ {
		paged.AddMembers(state.Status(&StatusPage{From: from, Limit: 1}, QueryStatusBytes))
	}
	paged.AddMembers(state.Status(&StatusPage{From: 1, Limit: 2}, QueryStatusBytes)) // a page seen twice adds nothing
	a, _ := json.Marshal(whole)
	b, _ := json.Marshal(paged)
	if !bytes.Equal(a, b) {
		t.Errorf("pages make\n%s\nthe whole is\n%s", b, a)
	}
}

// Every field of the status JSON is documented in the reference (docs/reference.md).
func TestStatusFieldsAreDocumented(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "status.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(readme, []byte("### The status JSON"))
	if start < 0 {
		t.Fatal(`docs/reference.md has no "### The status JSON" section`)
	}
	section := string(readme[start:])
	if end := strings.Index(section[4:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	var doc any
	if err := json.Unmarshal(golden, &doc); err != nil {
		t.Fatal(err)
	}
	for _, field := range jsonFields(doc, "") {
		if !strings.Contains(section, "`"+field+"`") {
			t.Errorf("the reference's status section (docs/reference.md) does not document `%s`", field)
		}
	}
}

// keyedByData are objects whose keys are values (member states), not fields.
var keyedByData = []string{"roles[].states"}

// jsonFields lists the dotted paths of every object key in v, arrays written as [].
func jsonFields(v any, prefix string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, inner := range v {
			out = append(out, prefix+k)
			if !slices.Contains(keyedByData, prefix+k) {
				out = append(out, jsonFields(inner, prefix+k+".")...)
			}
		}
	case []any:
		for _, inner := range v {
			out = append(out, jsonFields(inner, strings.TrimSuffix(prefix, ".")+"[].")...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
