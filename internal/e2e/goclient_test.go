package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// The client library is usable from another module: examples/go-client, a module of its
// own, builds against it alone and deploys, resizes, watches and deletes a cluster on the
// shared server's worker.
func TestGoClientExampleDrivesAClusterThroughTheLibraryAlone(t *testing.T) {
	guard(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	binary := filepath.Join(t.TempDir(), "go-client")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
	build.Dir = filepath.Join(root, "examples", "go-client")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/go-client, a module of its own: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, binary, "--address", server.Address(), "--name", "go-client", "--workers", "4", "--timeout", "2m")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("go-client: %v\n%s", err, out)
	}
	for _, want := range []string{
		"go-client: ready, generation 1, 3 members ready",
		"resize: worker 2 → 4",
		"go-client: ready, generation 2, 5 members ready",
		"go-client: deleted",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go-client did not say %q:\n%s", want, out)
		}
	}
	// The library's word is the server's: the cluster is gone for the CLI too.
	if res := cli(t, "status", "go-client"); !strings.Contains(res.Stdout, "deleted") {
		t.Errorf("status after the example deleted its cluster: %s", res)
	}
}
