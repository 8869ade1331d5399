package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend/docker"
	"github.com/clusterflow/clusterflow/internal/testenv"
)

// The README's first command on the docker backend: the registry example, its scripts
// unchanged, each member a container of the image its image.sh builds here, comes up in
// dependency order under `dev --backend docker`; workers reach the controller by its
// name on the cluster's network.
func TestTheRegistryExampleRunsInContainers(t *testing.T) {
	// Serial, as the other docker tests.
	guard(t)
	engine := testenv.StartDocker(t, "10.213.0.0/19")
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, filepath.Join(root, "examples/registry/image.sh"))
	build.Env = append(build.Environ(), "DOCKER_HOST="+engine.Host)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("examples/registry/image.sh: %v\n%s", err, out)
	}
	example := newExampleDev(t)
	example.args[2] = filepath.Join(root, "examples/registry/docker.yaml")
	dev := startDev(t, example.dir, "dev-docker", append(example.args, "--backend", "docker", "--docker-host", engine.Host))
	if err := dev.WaitFor("Phase:", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if out, _ := os.ReadFile(dev.Stdout); !strings.Contains(string(out), "Phase:    ready") {
		t.Fatalf("the example on the docker backend:\n%s", out)
	}
	if c, _, _ := engine.Leftovers(t, docker.LabelCluster); c != 5 {
		t.Errorf("the example runs %d containers; want its 5 members'", c)
	}
	env := []string{"TEMPORAL_ADDRESS=" + example.grpcAddr}
	for _, member := range []string{"demo-worker-0", "demo-worker-1", "demo-worker-2"} {
		if out := run(t, env, "logs", "demo", member, "--event", "configure"); !strings.Contains(out.Stdout, "registered with the registry at demo-controller-0:") {
			t.Errorf("%s did not register with the controller by its name: %s", member, out)
		}
	}
	if out := run(t, env, "logs", "demo", "demo-edge-0", "--event", "configure"); !strings.Contains(out.Stdout, "routing to 3 workers") {
		t.Errorf("the edge: %s", out)
	}
}
