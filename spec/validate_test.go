package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
)

// scripts is an in-memory ScriptReader for tests.
func scripts(files map[string]string) ScriptReader {
	return func(path string) ([]byte, error) {
		content, ok := files[path]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return []byte(content), nil
	}
}

var testScripts = scripts(map[string]string{"s.sh": "#!/bin/sh\necho hi\n", "other.sh": "#!/bin/sh\necho other\n"})

func TestParseAppliesDefaults(t *testing.T) {
	c, err := Parse([]byte(`
name: analytics
roles:
  - name: worker
    startscript: s.sh
    dependsOn: [controller]
    members: 3
    env: {KEY: value}
  - name: controller
    cardinality: "1"
    startscript: s.sh
    events: [configure, teardown]
    timeout: 10m
    heartbeatTimeout: 45s
    maxInFlight: 4
`), "cluster.yaml", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "analytics" || c.Origin != "cluster.yaml" || len(c.Roles) != 2 {
		t.Fatalf("unexpected cluster %+v", c)
	}
	worker, controller := c.Roles[0], c.Roles[1]
	if worker.Cardinality != "0+" || worker.Timeout != 30*time.Minute || worker.HeartbeatTimeout != 30*time.Second || !slices.Equal(worker.Events, AllEvents) || worker.MaxInFlight != 0 {
		t.Errorf("worker defaults not applied: %+v", worker)
	}
	if worker.Env["KEY"] != "value" {
		t.Errorf("env lost: %+v", worker.Env)
	}
	if controller.Members != 1 {
		t.Errorf("members left out should default to the cardinality's minimum, got %d", controller.Members)
	}
	if controller.Timeout != 10*time.Minute || controller.HeartbeatTimeout != 45*time.Second || controller.MaxInFlight != 4 || !slices.Equal(controller.Events, []Event{EventConfigure, EventTeardown}) {
		t.Errorf("controller fields not parsed: %+v", controller)
	}
	if len(c.Scripts) != 1 || worker.ScriptHash != controller.ScriptHash || c.Scripts[worker.ScriptHash] != "#!/bin/sh\necho hi\n" {
		t.Errorf("shared script should ship once: %+v", c.Scripts)
	}
	if c.TotalMembers() != 4 {
		t.Errorf("TotalMembers = %d", c.TotalMembers())
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"bad cluster name", "name: ../x\nroles: [{name: a, startscript: s.sh}]", []string{`name: "../x" is not a DNS-1123 label`}},
		{"long cluster name", "name: " + strings.Repeat("a", 64) + "\nroles: [{name: a, startscript: s.sh}]", []string{"name: \"" + strings.Repeat("a", 64) + "\" is 64 characters"}},
		{"missing name and roles", "roles: []", []string{"name: is required", "roles: at least one role is required"}},
		{"unknown dependency", "name: c\nroles: [{name: a, startscript: s.sh}, {name: b, startscript: s.sh, dependsOn: [nope]}]", []string{`roles[1].dependsOn: unknown role "nope"`}},
		{"cycle", "name: c\nroles: [{name: b, startscript: s.sh, dependsOn: [a]}, {name: a, startscript: s.sh, dependsOn: [b]}]", []string{"roles: dependency cycle a -> b -> a"}},
		{"self dependency", "name: c\nroles: [{name: a, startscript: s.sh, dependsOn: [a]}]", []string{`roles[0].dependsOn[0]: role "a" cannot depend on itself`}},
		{"exact cardinality mismatch", "name: c\nroles: [{name: a, startscript: s.sh, cardinality: \"1\", members: 3}]", []string{`roles[0].cardinality: "1" but members is 3`}},
		{"minimum cardinality mismatch", "name: c\nroles: [{name: a, startscript: s.sh, cardinality: \"2+\", members: 1}]", []string{`roles[0].cardinality: "2+" but members is 1`}},
		{"bad cardinality", "name: c\nroles: [{name: a, startscript: s.sh, cardinality: \"many\"}]", []string{`roles[0].cardinality: "many" is not a cardinality`}},
		{"missing script", "name: c\nroles: [{name: a, startscript: scripts/missing.sh}]", []string{"roles[0].startscript: scripts/missing.sh: no such file"}},
		{"no script", "name: c\nroles: [{name: a}]", []string{"roles[0].startscript: is required"}},
		{"negative members", "name: c\nroles: [{name: a, startscript: s.sh, members: -1}]", []string{"roles[0].members: is -1; it must be 0 or more"}},
		{"members not a number", "name: c\nroles: [{name: a, startscript: s.sh, members: three}]", []string{`roles[0].members: "three" is not a whole number`}},
		{"duplicate role", "name: c\nroles: [{name: a, startscript: s.sh}, {name: a, startscript: s.sh}]", []string{`roles[1].name: "a" is already the name of roles[0]`}},
		{"bad role name", "name: c\nroles: [{name: Web_1, startscript: s.sh}]", []string{`roles[0].name: "Web_1" is not a DNS-1123 label`}},
		{"unknown event", "name: c\nroles: [{name: a, startscript: s.sh, events: [configure, reboot]}]", []string{`roles[0].events[1]: unknown event "reboot"`}},
		{"bad timeout", "name: c\nroles: [{name: a, startscript: s.sh, timeout: soon}]", []string{`roles[0].timeout: "soon" is not a duration`}},
		{"negative timeout", "name: c\nroles: [{name: a, startscript: s.sh, timeout: -1s}]", []string{"roles[0].timeout: is -1s; it must be positive"}},
		{"short heartbeat timeout", "name: c\nroles: [{name: a, startscript: s.sh, heartbeatTimeout: 1s}]", []string{"roles[0].heartbeatTimeout: is 1s; it must be at least 5s"}},
		{"zero maxInFlight", "name: c\nroles: [{name: a, startscript: s.sh, maxInFlight: 0}]", []string{"roles[0].maxInFlight: is 0; it must be at least 1"}},
		{"reserved env", "name: c\nroles: [{name: a, startscript: s.sh, env: {CLUSTERFLOW_ROLE: x, 1BAD: y}}]", []string{"roles[0].env.1BAD: is not a valid environment variable name", "roles[0].env.CLUSTERFLOW_ROLE: the CLUSTERFLOW_ prefix is reserved"}},
		{"bad health policy", "name: c\nreconcileEvery: 10ms\nroles: [{name: a, startscript: s.sh, replaceAfter: 0s, flapLimit: 0, flapWindow: x, maxUnavailable: 150%, replaceOnConfigError: yes please, maxReplacements: 0}]", []string{
			"reconcileEvery: is 10ms; it must be at least 1s", "roles[0].replaceAfter: is 0s; it must be at least 1s", "roles[0].flapLimit: is 0; it must be at least 1",
			`roles[0].flapWindow: "x" is not a duration`, `roles[0].maxUnavailable: "150%" is more than 100%`, `roles[0].replaceOnConfigError: "yes please" is not true or false`,
			"roles[0].maxReplacements: is 0; it must be at least 1",
		}},
		{"bad placement", "name: c\nroles: [{name: a, startscript: s.sh, placement: {hosts: {'': a, zone: 'x,y'}, maxPerHost: 0, spreadBy: 'a=b', hostz: 1}}]", []string{
			"roles[0].placement.hosts.: label key \"\" must be 1 to 63 characters", `roles[0].placement.hosts.zone: label value "x,y" must be`,
			"roles[0].placement.maxPerHost: is 0; it must be at least 1", `roles[0].placement.spreadBy: label key "a=b"`, `roles[0].placement.hostz: unknown field (did you mean "hosts"?)`,
		}},
		{"typo in field", "name: c\nroles: [{name: a, startscript: s.sh, dependson: [b]}]", []string{`roles[0].dependson: unknown field (did you mean "dependsOn"?)`}},
		{"roles not a list", "name: C\nroles: {a: 1}", []string{"roles: must be a list, got a mapping", `name: "C" is not a DNS-1123 label`}},
		{"not yaml", "name: [", []string{"spec: not valid YAML"}},
		{"empty", "", []string{"spec: is empty"}},
		{"role env past its limit", "name: c\nroles: [{name: a, startscript: s.sh, env: {BIG: " + strings.Repeat("x", MaxRoleEnvBytes) + "}}]", []string{"roles[0].env: is 65 KiB (names and values); a role's env is limited to 64 KiB"}},
		{"cluster env past its limit", "name: c\nroles: [" + strings.Repeat("{name: a, startscript: s.sh, env: {BIG: "+strings.Repeat("x", 60<<10)+"}}, ", 4) +
			"{name: e, startscript: s.sh, env: {BIG: " + strings.Repeat("x", 60<<10) + "}}]",
			[]string{"roles: the roles' env is 301 KiB in all; a cluster's env is limited to 256 KiB", `roles[1].name: "a" is already`, `roles[2].name: "a" is already`, `roles[3].name: "a" is already`}},
		{"role members past the limit", "name: c\nroles: [{name: a, startscript: s.sh, members: 3000000}]", []string{"roles[0].members: is 3000000; a role has at most 20000 members", "roles: 3000000 members in all; a cluster has at most 20000"}},
		{"cluster members past the limit", "name: c\nroles: [{name: a, startscript: s.sh, members: 10000}, {name: b, startscript: s.sh, members: 10000}, {name: d, startscript: s.sh, members: 1}]", []string{"roles: 20001 members in all; a cluster has at most 20000"}},
		{"many at once", "name: Bad\nroles: [{name: a, startscript: nope.sh, members: -2, dependsOn: [zz]}]", []string{
			`name: "Bad" is not a DNS-1123 label`, "roles[0].members: is -2", `roles[0].dependsOn: unknown role "zz"`, "roles[0].startscript: nope.sh: no such file",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.spec), "", testScripts)
			var invalid *apperr.Error
			if !errors.As(err, &invalid) || invalid.Code != apperr.Invalid {
				t.Fatalf("want an invalid *apperr.Error, got %v", err)
			}
			if len(invalid.Problems) != len(tt.want) {
				t.Errorf("want %d problems, got %d:\n%v", len(tt.want), len(invalid.Problems), err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("missing %q in:\n%v", want, err)
				}
			}
		})
	}
}

func TestTooManyRolesAreRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: c\nroles:\n")
	for i := range MaxRoles + 1 {
		fmt.Fprintf(&b, "  - {name: r%d, startscript: s.sh}\n", i)
	}
	_, err := Parse([]byte(b.String()), "", testScripts)
	if err == nil || !strings.Contains(err.Error(), "roles: 101 roles; a cluster has at most 100") {
		t.Errorf("want the roles refused, got %v", err)
	}
}

// Limits count what travels: a value full of escapes counts as its JSON text.
func TestEnvBytesCountsTheJSONText(t *testing.T) {
	if got := EnvBytes(map[string]string{"A": "x\ny"}); got != len(`"A"`)+len(`"x\ny"`) {
		t.Errorf("EnvBytes = %d", got)
	}
	if got := EnvBytes(map[string]string{"A": "\x01"}); got != len(`"A"`)+len(`"\u0001"`) {
		t.Errorf("EnvBytes of a control character = %d", got)
	}
}

func TestSomeAndClip(t *testing.T) {
	if got := Some([]string{"a", "b", "c", "d"}, 2); got != "a, b and 2 more" {
		t.Errorf("Some = %q", got)
	}
	if got := Some([]string{"a", "b"}, 2); got != "a, b" {
		t.Errorf("Some = %q", got)
	}
	if got := Clip("héllo world", 6); got != "hé…" || len(got) > 6 {
		t.Errorf("Clip = %q", got)
	}
	if got := Clip("short", 10); got != "short" {
		t.Errorf("Clip = %q", got)
	}
}

func TestParseReadsPlacement(t *testing.T) {
	c, err := Parse([]byte("name: c\nroles: [{name: a, startscript: s.sh, members: 6, placement: {hosts: {zone: a, disk: ssd}, maxPerHost: 1, spreadBy: rack}}]"), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Roles[0].Placement
	if p.Selector() != "disk=ssd,zone=a" || p.MaxPerHost != 1 || p.SpreadBy != "rack" {
		t.Errorf("placement read as %+v", p)
	}
	if !p.Matches(map[string]string{"zone": "a", "disk": "ssd", "rack": "1"}) || p.Matches(map[string]string{"zone": "a"}) {
		t.Error("selector matches the wrong hosts")
	}
}

func TestStartIsOptIn(t *testing.T) {
	c, err := Parse([]byte("name: c\nroles: [{name: a, startscript: s.sh}, {name: b, startscript: s.sh, events: [configure, start]}]"), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Roles[0].Wants(EventStart) || !c.Roles[1].Wants(EventStart) {
		t.Errorf("start subscriptions: a %v, b %v", c.Roles[0].Events, c.Roles[1].Events)
	}
}

func TestParseLabels(t *testing.T) {
	labels, err := ParseLabels("zone=a, disk=ssd")
	if err != nil || len(labels) != 2 || labels["zone"] != "a" || labels["disk"] != "ssd" {
		t.Errorf("got %v, %v", labels, err)
	}
	for _, bad := range []string{"zone", "zone=a,zone=b", "=a"} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseReadsHealthPolicy(t *testing.T) {
	c, err := Parse([]byte(`
name: c
reconcileEvery: 30s
roles:
  - name: worker
    startscript: s.sh
    members: 4
    replaceAfter: 2m
    flapLimit: 5
    flapWindow: 1h
    maxUnavailable: "1"
    replaceOnConfigError: true
    maxReplacements: 2
  - name: plain
    startscript: s.sh
`), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	want := Health{ReplaceAfter: 2 * time.Minute, FlapLimit: 5, FlapWindow: time.Hour, MaxUnavailable: "1", ReplaceOnConfigError: true, MaxReplacements: 2}
	if c.Roles[0].Health != want || c.ReconcileInterval() != 30*time.Second {
		t.Errorf("health policy = %+v, reconcile every %s", c.Roles[0].Health, c.ReconcileInterval())
	}
	defaults := c.Roles[1].Health.WithDefaults()
	if defaults.ReplaceAfter != 5*time.Minute || defaults.FlapLimit != 3 || defaults.FlapWindow != 10*time.Minute || defaults.MaxUnavailable != "50%" || defaults.ReplaceOnConfigError || defaults.MaxReplacements != 3 {
		t.Errorf("health defaults = %+v", defaults)
	}
}

func TestUnavailableLimit(t *testing.T) {
	for _, tt := range []struct {
		max        string
		size, want int
	}{{"", 4, 2}, {"", 1, 1}, {"", 3, 1}, {"50%", 0, 1}, {"2", 10, 2}, {"0", 3, 1}, {"100%", 5, 5}, {"25%", 8, 2}} {
		if got := (Health{MaxUnavailable: tt.max}).UnavailableLimit(tt.size); got != tt.want {
			t.Errorf("maxUnavailable %q of %d = %d, want %d", tt.max, tt.size, got, tt.want)
		}
	}
}

func TestLoadReadsScriptsBesideTheSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scripts/a.sh", "#!/bin/sh\n")
	write("scripts/big.sh", strings.Repeat("x", MaxScriptSize+1))
	write("cluster.yaml", "name: c\nroles:\n- {name: a, startscript: scripts/a.sh}\n- {name: b, startscript: scripts/big.sh}\n- {name: d, startscript: scripts}\n")
	_, err := Load(filepath.Join(dir, "cluster.yaml"))
	for _, want := range []string{"roles[1].startscript: scripts/big.sh: is larger than the 256 KiB limit", "roles[2].startscript: scripts: is a folder, not a file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
	write("cluster.yaml", "name: c\nroles:\n- {name: a, startscript: scripts/a.sh}\n")
	c, err := Load(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Scripts[c.Roles[0].ScriptHash] != "#!/bin/sh\n" {
		t.Errorf("script content not shipped: %+v", c.Scripts)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "spec: no such file") {
		t.Errorf("missing spec file: %v", err)
	}
}

func TestCardinalityAllows(t *testing.T) {
	for _, tt := range []struct {
		card Cardinality
		n    int
		ok   bool
	}{{"1", 1, true}, {"1", 2, false}, {"1+", 0, false}, {"1+", 5, true}, {"0+", 0, true}, {"x", 1, false}} {
		if err := tt.card.Allows(tt.n); (err == nil) != tt.ok {
			t.Errorf("%q allows %d: got %v", tt.card, tt.n, err)
		}
	}
}

// YAML's anchors, aliases and merge keys read as what they stand for: an env shared by
// alias, a role's defaults merged in (a key the role writes wins), anchors kept in a
// top-level x- field (as in Compose files), and a problem in what an alias stands for is
// still named by each path it is read at.
func TestParseFollowsAnchorsAliasesAndMergeKeys(t *testing.T) {
	c, err := Parse([]byte(`
name: anchored
x-ports: &ports {CLIENT_PORT: "2379", PEER_PORT: "2380"}
x-role: &defaults {startscript: s.sh, members: 3, timeout: 5m, events: &events [configure, teardown]}
roles:
  - {name: a, env: *ports, <<: *defaults}
  - name: b
    <<: [*defaults]
    members: 1
    events: *events
    env:
      <<: *ports
      PEER_PORT: "2381"
`), "cluster.yaml", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Roles[0], c.Roles[1]
	if a.Members != 3 || a.Timeout != 5*time.Minute || a.Env["CLIENT_PORT"] != "2379" || !slices.Equal(a.Events, []Event{EventConfigure, EventTeardown}) {
		t.Errorf("role a: %+v", a)
	}
	if b.Members != 1 || b.Timeout != 5*time.Minute || b.ScriptHash != a.ScriptHash || !slices.Equal(b.Events, []Event{EventConfigure, EventTeardown}) {
		t.Errorf("role b did not merge its defaults under its own keys: %+v", b)
	}
	if b.Env["CLIENT_PORT"] != "2379" || b.Env["PEER_PORT"] != "2381" {
		t.Errorf("role b's env did not merge the shared ports under its own: %v", b.Env)
	}
	_, err = Parse([]byte(`
name: anchored
y-other: 1
roles:
  - {name: a, startscript: s.sh, env: &bad {"1X": "y"}}
  - {name: b, startscript: s.sh, env: *bad}
`), "cluster.yaml", testScripts)
	if err == nil || !strings.Contains(err.Error(), "roles[0].env.1X") || !strings.Contains(err.Error(), "roles[1].env.1X") || !strings.Contains(err.Error(), "y-other: unknown field") {
		t.Errorf("a bad env shared by alias should be named at each place it is read, and only x- fields are extensions: %v", err)
	}
}

// Limits are read as given, default where left out, and refused out of their bounds, each
// by its field.
func TestParseReadsLimits(t *testing.T) {
	c, err := Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, limits: {processes: 64, outputMiB: 8}}\n"), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Roles[0].Limits; got != (Limits{Processes: 64, OutputMiB: 8}) || got.OrDefaults() != (Limits{Processes: 64, OpenFiles: DefaultLimits.OpenFiles, OutputMiB: 8}) {
		t.Errorf("limits %+v (with defaults %+v)", got, got.OrDefaults())
	}
	_, err = Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, limits: {processes: 1, openFiles: 2000000, outputMiB: 0, cpus: 2}}\n"), "", testScripts)
	for _, want := range []string{
		"roles[0].limits.processes: is 1; it must be from 16 to 1048576 (leave it out for 4096)",
		"roles[0].limits.openFiles: is 2000000; it must be from 64 to 1048576",
		"roles[0].limits.outputMiB: is 0; it must be from 1 to 4096",
		"roles[0].limits.cpus: unknown field",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad limits: %v; want %q", err, want)
		}
	}
}

func TestContainerFieldsAreReadAndEachProblemNamed(t *testing.T) {
	good := `name: c
roles:
  - name: db
    members: 1
    startscript: s.sh
    image: registry.example.com/etcd:3.4
    user: "1000:1000"
    resources: {cpus: 0.5, memory: 512Mi, pids: 256}
    volumes: [/var/lib/etcd, /data]
    ports: {client: 2379, peer: 2380}
    publish: [client]
    privileged: true
`
	c, err := Parse([]byte(good), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	want := Container{Image: "registry.example.com/etcd:3.4", User: "1000:1000", Resources: Resources{CPUs: 0.5, Memory: 512 << 20, PIDs: 256}, Volumes: []string{"/var/lib/etcd", "/data"}, Publish: []string{"client"}, Privileged: true}
	if got := c.Roles[0].Container; !reflect.DeepEqual(got, want) {
		t.Fatalf("container = %+v, want %+v", got, want)
	}
	if got := ContainerFields(c.Roles[0].Container); !reflect.DeepEqual(got, []string{"image", "user", "resources", "volumes", "publish", "privileged"}) {
		t.Fatalf("fields = %v", got)
	}
	bad := `name: c
roles:
  - name: db
    members: 1
    startscript: s.sh
    image: "Not An Image"
    user: etcd
    resources: {cpus: 0, memory: 1Mi, pids: 3}
    volumes: [relative, /data, /data, "/a:b", /]
    ports: {client: 2379}
    publish: [client, peer, client]
  - name: web
    members: 1
    startscript: s.sh
    volumes: [/x]
  - name: cache
    members: 1
    startscript: s.sh
    privileged: false
`
	_, err = Parse([]byte(bad), "", testScripts)
	if err == nil {
		t.Fatal("a spec with bad container fields was taken")
	}
	// Resources alone bound a member in a folder too (its cgroup): no image needed.
	if c, err := Parse([]byte("name: c\nroles:\n  - {name: r, startscript: s.sh, resources: {memory: 64Mi, pids: 40}}\n"), "", testScripts); err != nil || c.Roles[0].Resources.Memory != 64<<20 {
		t.Errorf("a role with resources and no image: %v", err)
	}
	for _, want := range []string{
		"roles[0].image: \"Not An Image\" is not an image reference",
		"roles[0].user: \"etcd\" is not a numeric uid[:gid]",
		"roles[0].resources.cpus: \"0\" is not a number of CPUs",
		"roles[0].resources.memory: \"1Mi\" is under 6Mi",
		"roles[0].resources.pids: is 3",
		"roles[0].volumes[0]: \"relative\" is not an absolute",
		"roles[0].volumes[2]: \"/data\" is listed twice",
		"roles[0].volumes[3]: \"/a:b\" holds ':'",
		"roles[0].volumes[4]: \"/\" is not an absolute",
		"roles[0].publish[1]: \"peer\" is not one of the role's ports",
		"roles[0].publish[2]: \"client\" is listed twice",
		"roles[1].image: is required with user, volumes, publish or privileged",
		"roles[2].image: is required with",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
