package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// There is no Docker engine here, so the compose file and Dockerfile are checked for
// structure: the service graph, pinned images matching go.mod, and clusterflow commands the
// CLI accepts.

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Environment map[string]string            `yaml:"environment"`
	Command     []string                     `yaml:"command"`
	Volumes     []string                     `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
}

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

func TestComposeFileStructure(t *testing.T) {
	t.Parallel()
	guard(t)
	var c composeFile
	if err := yaml.Unmarshal([]byte(readRepoFile(t, "docker-compose.yml")), &c); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	server, ui := goModVersion(t, "go.temporal.io/server"), goModVersion(t, "github.com/temporalio/ui-server/v2")
	wantImages := map[string]string{
		"postgresql":         "postgres:",
		"temporal-schema":    "temporalio/admin-tools:" + server,
		"temporal":           "temporalio/server:" + server,
		"temporal-namespace": "temporalio/admin-tools:" + server,
		"temporal-ui":        "temporalio/ui:" + ui,
		"clusterflow-setup":  "clusterflow:",
		"clusterflow-worker": "clusterflow:",
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
		"temporal":           {"temporal-schema": "service_completed_successfully"},
		"temporal-namespace": {"temporal": "service_healthy"},
		"temporal-ui":        {"temporal": "service_healthy"},
		"clusterflow-setup":  {"temporal-namespace": "service_completed_successfully"},
		"clusterflow-worker": {"clusterflow-setup": "service_completed_successfully"},
	}
	for name, deps := range wantDeps {
		for dep, condition := range deps {
			if got := c.Services[name].DependsOn[dep]["condition"]; got != condition {
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, got, condition)
			}
		}
	}
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "clusterflow-worker"} {
		if hc := c.Services[name].Healthcheck; hc == nil || len(hc.Test) == 0 {
			t.Errorf("%s has no healthcheck", name)
		}
	}
	if !slices.ContainsFunc(c.Services["postgresql"].Volumes, func(v string) bool { return strings.HasPrefix(v, "postgres-data:") }) || c.Volumes == nil {
		t.Errorf("PostgreSQL keeps its data in no named volume: %v", c.Services["postgresql"].Volumes)
	}
	if c.Services["clusterflow-setup"].Build == nil {
		t.Error("clusterflow-setup does not build the image from the Dockerfile")
	}
	if w := c.Services["clusterflow-worker"]; w.Deploy.Replicas != 2 {
		t.Errorf("worker replicas %d, want 2", w.Deploy.Replicas)
	}
	// The clusterflow services reach Temporal by its service name, with commands the CLI
	// accepts (flags are parsed before -h is honoured).
	for _, name := range []string{"clusterflow-setup", "clusterflow-worker"} {
		s := c.Services[name]
		if s.Environment["TEMPORAL_ADDRESS"] != "temporal:7233" {
			t.Errorf("%s: TEMPORAL_ADDRESS %q", name, s.Environment["TEMPORAL_ADDRESS"])
		}
		if res := cli(t, append(slices.Clone(s.Command), "-h")...); res.Code != 0 {
			t.Errorf("%s: clusterflow %v is refused: %s", name, s.Command, res)
		}
	}
	if cmd := c.Services["clusterflow-setup"].Command; !slices.Equal(cmd, []string{"setup"}) {
		t.Errorf("setup command %v", cmd)
	}
	if cmd := c.Services["clusterflow-worker"].Command; len(cmd) == 0 || cmd[0] != "worker" || !slices.Contains(cmd, "--metrics-address") {
		t.Errorf("worker command %v", cmd)
	}
	// Files the services mount exist.
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
				readRepoFile(t, src)
			} else if _, ok := c.Volumes[src]; !ok && !strings.HasPrefix(src, "/") {
				t.Errorf("%s mounts undeclared volume %q", name, src)
			}
		}
	}
	if script := readRepoFile(t, "deploy/temporal-schema.sh"); !strings.Contains(script, "update-schema") {
		t.Error("the schema job does not update the schema")
	}
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
	for _, want := range []string{"COPY --from=build", "./cmd/clusterflow", `ENTRYPOINT ["clusterflow"]`} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
