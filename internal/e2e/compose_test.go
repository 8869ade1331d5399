package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// There is no Docker engine here, so the compose file and Dockerfile are checked for
// structure: the service graph, pinned images matching go.mod, and clusterflow commands the
// CLI accepts.

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// goModVersion returns the version go.mod requires of a module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+v(\S+)`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return m[1]
}

// readCompose reads docker-compose.yml.
func readCompose(t *testing.T) testenv.ComposeFile {
	t.Helper()
	c, err := testenv.ReadCompose()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComposeFileStructure(t *testing.T) {
	t.Parallel()
	guard(t)
	c := readCompose(t)
	server, ui := goModVersion(t, "go.temporal.io/server"), goModVersion(t, "github.com/temporalio/ui-server/v2")
	wantImages := map[string]string{
		"postgresql":         "postgres:",
		"temporal-schema":    "temporalio/admin-tools:" + server,
		"temporal":           "temporalio/server:" + server,
		"temporal-namespace": "temporalio/admin-tools:" + server,
		"temporal-ui":        "temporalio/ui:" + ui,
		"clusterflow-certs":  "clusterflow:",
		"clusterflow-setup":  "clusterflow:",
		"clusterflow-host-1": "clusterflow:",
		"clusterflow-host-2": "clusterflow:",
	}
	for name, prefix := range wantImages {
		s, ok := c.Services[name]
		switch {
		case !ok:
			t.Errorf("service %s missing", name)
		case !strings.HasPrefix(s.Image, prefix) || strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image, ":"):
			t.Errorf("service %s: image %q, want a pinned %s…", name, s.Image, prefix)
		}
	}
	// Each service starts only once what it needs is ready or done.
	wantDeps := map[string]map[string]string{
		"temporal-schema":    {"postgresql": "service_healthy"},
		"temporal":           {"temporal-schema": "service_completed_successfully", "clusterflow-certs": "service_completed_successfully"},
		"temporal-namespace": {"temporal": "service_healthy"},
		"temporal-ui":        {"temporal": "service_healthy"},
		"clusterflow-setup":  {"temporal-namespace": "service_completed_successfully"},
		"clusterflow-host-1": {"clusterflow-setup": "service_completed_successfully"},
		"clusterflow-host-2": {"clusterflow-setup": "service_completed_successfully"},
	}
	for name, deps := range wantDeps {
		for dep, condition := range deps {
			if got := c.Services[name].DependsOn[dep]["condition"]; got != condition {
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, got, condition)
			}
		}
	}
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "clusterflow-host-1", "clusterflow-host-2"} {
		if hc := c.Services[name].Healthcheck; hc == nil || len(hc.Test) == 0 {
			t.Errorf("%s has no healthcheck", name)
		}
	}
	if !slices.ContainsFunc(c.Services["postgresql"].Volumes, func(v string) bool { return strings.HasPrefix(v, "postgres-data:") }) || c.Volumes == nil {
		t.Errorf("PostgreSQL keeps its data in no named volume: %v", c.Services["postgresql"].Volumes)
	}
	if c.Services["clusterflow-certs"].Build == nil {
		t.Error("clusterflow-certs, the first to run, does not build the image from the Dockerfile")
	}
	// Each worker is a host of its own, with a data volume no other service mounts: two
	// containers must never share one agent's run records.
	hostVolumes := map[string]string{}
	for _, name := range []string{"clusterflow-host-1", "clusterflow-host-2"} {
		w := c.Services[name]
		if w.Deploy.Replicas > 1 {
			t.Errorf("%s has %d replicas sharing one host name and volume", name, w.Deploy.Replicas)
		}
		i := slices.Index(w.Command, "--host")
		if i < 0 || i+1 == len(w.Command) {
			t.Errorf("%s: worker command %v names no --host", name, w.Command)
			continue
		}
		if other, taken := hostVolumes[w.Command[i+1]]; taken {
			t.Errorf("%s and %s are both host %s", name, other, w.Command[i+1])
		}
		hostVolumes[w.Command[i+1]] = name
		for _, v := range w.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if dst != "/var/lib/clusterflow" {
				continue
			}
			for other, s := range c.Services {
				if other != name && slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasPrefix(v, src+":") }) {
					t.Errorf("%s shares its volume %s with %s", name, src, other)
				}
			}
		}
	}
	// The clusterflow services reach Temporal by its service name, with commands the CLI
	// accepts (flags are parsed before -h is honoured).
	for _, name := range []string{"clusterflow-setup", "clusterflow-host-1", "clusterflow-host-2"} {
		s := c.Services[name]
		if s.Environment["TEMPORAL_ADDRESS"] != "temporal:7233" {
			t.Errorf("%s: TEMPORAL_ADDRESS %q", name, s.Environment["TEMPORAL_ADDRESS"])
		}
		if res := cli(t, append(hostCommand(s), "-h")...); res.Code != 0 {
			t.Errorf("%s: clusterflow %v is refused: %s", name, s.Command, res)
		}
	}
	if cmd := c.Services["clusterflow-setup"].Command; !slices.Equal(cmd, []string{"setup"}) {
		t.Errorf("setup command %v", cmd)
	}
	for _, name := range []string{"clusterflow-host-1", "clusterflow-host-2"} {
		s := c.Services[name]
		if cmd := s.Command; len(cmd) == 0 || !slices.Contains(cmd, "--metrics-address") {
			t.Errorf("%s: worker command %v", name, cmd)
		}
		// Hosts run the light binary, as the image's host entrypoint runs it (an agent as
		// root, with the capabilities granted here alone, and the worker as clusterflow with
		// the command's arguments), under an init that reaps zombies.
		if !slices.Equal(s.Entrypoint, []string{"/usr/bin/tini", "--", "clusterflow-host.sh"}) {
			t.Errorf("%s: entrypoint %v, want clusterflow-host.sh (deploy/docker/host.sh) under tini", name, s.Entrypoint)
		}
		if s.User != "root" || !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.CapAdd) == 0 {
			t.Errorf("%s: user %q, cap_drop %v, cap_add %v; want root with all capabilities dropped but the agent's", name, s.User, s.CapDrop, s.CapAdd)
		}
		if out, err := runHostBinary(append(hostCommand(s), "-h")...); err != nil {
			t.Errorf("%s: clusterflow-host %v is refused: %v\n%s", name, s.Command, err, out)
		}
	}
	// Files the services mount exist, but for the folder the certificate job fills.
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if name != "clusterflow-certs" {
					readRepoFile(t, src)
				}
			} else if _, ok := c.Volumes[src]; !ok && !strings.HasPrefix(src, "/") {
				t.Errorf("%s mounts undeclared volume %q", name, src)
			}
		}
	}
	if script := readRepoFile(t, "deploy/temporal-schema.sh"); !strings.Contains(script, "update-schema") {
		t.Error("the schema job does not update the schema")
	}
}

// hostCommand is the clusterflow command a service runs: a host's worker, as its
// entrypoint (deploy/docker/host.sh) runs it, or the command as it is.
func hostCommand(s testenv.ComposeService) []string {
	if slices.Contains(s.Entrypoint, "clusterflow-host.sh") {
		return append([]string{"worker", "--agent-socket", "/run/clusterflow/agent.sock"}, s.Command...)
	}
	return slices.Clone(s.Command)
}

func TestDockerfileIsMultiStageOnGoModsGo(t *testing.T) {
	t.Parallel()
	guard(t)
	dockerfile := readRepoFile(t, "Dockerfile")
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(froms) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(froms))
	}
	goVersion := regexp.MustCompile(`(?m)^go\s+(\S+)`).FindStringSubmatch(readRepoFile(t, "go.mod"))[1]
	if !strings.HasPrefix(froms[0][1], "golang:"+goVersion) {
		t.Errorf("build stage %s, want golang:%s", froms[0][1], goVersion)
	}
	for _, want := range []string{"COPY --from=build", "./cmd/clusterflow ", "./cmd/clusterflow-host", "install -y --no-install-recommends tini", `ENTRYPOINT ["/usr/bin/tini", "--", "clusterflow"]`,
		"COPY deploy/docker/host.sh /usr/local/bin/clusterflow-host.sh"} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The runtime stage ends as a user that is not root.
	runtime := dockerfile[strings.LastIndex(dockerfile, "\nFROM "):]
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(runtime, -1)
	if len(users) == 0 || slices.Contains([]string{"root", "0", "0:0"}, users[len(users)-1][1]) {
		t.Errorf("the image runs as root (USER lines of its runtime stage: %v)", users)
	}
}

// TestTheSystemdUnitsAreHardened rates the shipped units with systemd's own review,
// `systemd-analyze security --offline=true`, which must say at most 5.0 for each (lower is
// safer; the unit as first shipped, as root with nothing restricted, rated 9.6). The worker,
// which holds the Temporal credentials, never runs as root nor keeps a capability; the
// agent, which starts scripts as their clusters' users, keeps those capabilities alone.
func TestTheSystemdUnitsAreHardened(t *testing.T) {
	t.Parallel()
	guard(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("the units' rating needs systemd-analyze (apt-get install systemd; .ci/run does)")
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"clusterflow-worker.service", "clusterflow-agent.service"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, analyze, "security", "--offline=true", "--no-pager", filepath.Join(root, "deploy/systemd", name)).CombinedOutput()
		cancel()
		// systemd-analyze security exits non-zero when the rating passes its own threshold.
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("systemd-analyze security gave %s no rating (%v):\n%s", name, err, out)
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("systemd-analyze security %s: %.1f", name, score)
		if score > 5.0 {
			t.Errorf("%s rates %.1f, more than 5.0:\n%s", name, score, out)
		}
	}
	unit := readRepoFile(t, "deploy/systemd/clusterflow-worker.service")
	for _, want := range []string{"\nUser=clusterflow\n", "\nCapabilityBoundingSet=\n", "\nNoNewPrivileges=yes\n", "\nUMask=0077\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the worker's unit lacks %q", strings.TrimSpace(want))
		}
	}
	agentUnit := unitService(t, "clusterflow-agent.service")
	if user := agentUnit["User"]; len(user) != 0 {
		t.Errorf("the agent's unit runs as %v; it runs as root, with a few capabilities", user)
	}
	caps := strings.Fields(strings.Join(agentUnit["CapabilityBoundingSet"], " "))
	slices.Sort(caps)
	if want := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"}; !slices.Equal(caps, want) {
		t.Errorf("the agent's capabilities: %v, want %v", caps, want)
	}
	if !slices.Equal(agentUnit["NoNewPrivileges"], []string{"yes"}) || !slices.Equal(agentUnit["KillMode"], []string{"process"}) {
		t.Errorf("the agent's unit: NoNewPrivileges %v (scripts inherit it), KillMode %v (its restart leaves scripts running)", agentUnit["NoNewPrivileges"], agentUnit["KillMode"])
	}
}

// TestSystemdUnitRunsAHost checks the shipped units' commands are ones the CLI accepts: a
// host's agent and its worker, which calls it.
func TestSystemdUnitRunsAHost(t *testing.T) {
	t.Parallel()
	guard(t)
	for unit, command := range map[string]string{"clusterflow-worker.service": "worker", "clusterflow-agent.service": "agent"} {
		exec := strings.Join(unitService(t, unit)["ExecStart"], " ")
		exec = strings.NewReplacer("%H", "db-1", "${CLUSTERFLOW_LABELS}", "zone=a", "${CLUSTERFLOW_ADDRESS}", "10.0.0.11").Replace(exec)
		fields := strings.Fields(exec)
		if len(fields) < 2 || !strings.HasSuffix(fields[0], "/clusterflow-host") || fields[1] != command {
			t.Fatalf("%s: ExecStart does not run a host's %s with clusterflow-host: %v", unit, command, fields)
		}
		args := fields[1:]
		if command == "worker" && (!slices.Contains(args, "--host") || !slices.Contains(args, "--agent-socket")) {
			t.Errorf("%s: the worker is no host's, or calls no agent: %v", unit, args)
		}
		if out, err := runHostBinary(append(args, "-h")...); err != nil {
			t.Errorf("clusterflow-host %v is refused: %v\n%s", args, err, out)
		}
	}
}

// runHostBinary runs cmd/clusterflow-host to completion, within a minute.
func runHostBinary(args ...string) (string, error) {
	bin, err := testenv.HostBinary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// The compose file exposes nothing beyond the machine it runs on and ships no password:
// every published port binds 127.0.0.1, every password comes from the operator's .env
// and compose refuses to start without one, and the Web UI, which proxies the whole
// Temporal API, is read-only unless the operator turns write actions on.
func TestComposeExposesNothingByDefault(t *testing.T) {
	t.Parallel()
	guard(t)
	c, err := testenv.ReadComposeRaw()
	if err != nil {
		t.Fatal(err)
	}
	required := regexp.MustCompile(`^\$\{([A-Z_]+):\?[^}]+\}$`)
	passwords := 0
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q: bind it to 127.0.0.1", name, p)
			}
		}
		for k, v := range s.Environment {
			if !strings.Contains(k, "PASSWORD") && !strings.Contains(k, "PWD") {
				continue
			}
			passwords++
			m := required.FindStringSubmatch(v)
			if m == nil {
				t.Errorf("%s: %s is %q, a default; want ${VAR:?why} from the operator's .env", name, k, v)
				continue
			}
			if _, err := testenv.InterpolateCompose(v, map[string]string{}); err == nil {
				t.Errorf("%s: %s: an unset %s is accepted", name, k, m[1])
			}
		}
	}
	if passwords < 3 {
		t.Errorf("found %d password settings, want the database's, the schema job's and the server's", passwords)
	}
	readOnly, err := testenv.InterpolateCompose(c.Services["temporal-ui"].Environment["TEMPORAL_DISABLE_WRITE_ACTIONS"], map[string]string{})
	if err != nil || readOnly != "true" {
		t.Errorf("the Web UI's write actions: TEMPORAL_DISABLE_WRITE_ACTIONS is %q by default, want true", readOnly)
	}
	example := readRepoFile(t, ".env.example")
	if !regexp.MustCompile(`(?m)^POSTGRES_PASSWORD=$`).MatchString(example) {
		t.Errorf(".env.example must leave POSTGRES_PASSWORD empty, for the operator to choose:\n%s", example)
	}
	if _, err := testenv.InterpolateCompose(strings.Join(c.Services["clusterflow-certs"].Command, " "), map[string]string{}); err == nil ||
		!regexp.MustCompile(`(?m)^OPERATOR_UID=$`).MatchString(example) {
		t.Error("the certificate job must refuse to start without the operator's OPERATOR_UID from .env, which .env.example leaves empty")
	}
	if !regexp.MustCompile(`(?m)^/temporal-tls/$`).MatchString(readRepoFile(t, ".gitignore")) {
		t.Error(".gitignore does not keep the operator's client certificate (temporal-tls/) out of version control")
	}
	if !regexp.MustCompile(`(?m)^/\.env$`).MatchString(readRepoFile(t, ".gitignore")) {
		t.Error(".gitignore does not keep .env out of version control")
	}
}
