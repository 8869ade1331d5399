package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/internal/version"
)

// A release's binaries are built by `make build` (docs/releases.md), which tells the linker
// the commit: the host binary built so names it through `clusterflow version`, with the
// release this code is and the Go that built it. Hosts' workers register the same version
// (fleet.hostList checks it in every fleet test).
func TestAReleaseBuildNamesItsCommit(t *testing.T) {
	t.Parallel()
	guard(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := t.TempDir()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	make := exec.CommandContext(ctx, "make", "-s", "build", "BIN="+bin, "COMMANDS=./cmd/clusterflow-host", "COMMIT="+commit)
	make.Dir = root
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	host := filepath.Join(bin, "clusterflow-host")
	out, err := exec.CommandContext(ctx, host, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("version -o json: %v", err)
	}
	var v version.Info
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	if v.Release != version.Release || v.Commit != commit || v.Go != runtime.Version() {
		t.Errorf("version -o json says %+v, want release %s, commit %s, %s", v, version.Release, commit, runtime.Version())
	}
	out, err = exec.CommandContext(ctx, host, "version").Output()
	if want := "clusterflow " + version.Release + " (commit 0123456789ab), " + runtime.Version(); err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("version printed %q (%v), want %q", out, err, want)
	}
}
