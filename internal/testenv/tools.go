package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var (
	toolsDir, temporalDir string

	alertmanagerOnce sync.Once
	alertmanagerBin  string
	alertmanagerErr  error
)

// Alertmanager builds Prometheus Alertmanager from the tools module (internal/tools), once
// per test process, and returns its path. A failed build fails the test that needs it.
func Alertmanager() (string, error) {
	alertmanagerOnce.Do(func() {
		dir, err := buildDir(&toolsDir, "clusterflow-tools-")
		if err != nil {
			alertmanagerErr = err
			return
		}
		alertmanagerBin = filepath.Join(dir, "alertmanager")
		alertmanagerErr = buildTool("internal/tools", alertmanagerBin, "github.com/prometheus/alertmanager/cmd/alertmanager")
	})
	return alertmanagerBin, alertmanagerErr
}

// buildDir makes a folder for built programs, which RemoveBuilds removes.
func buildDir(dir *string, pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		*dir = d
	}
	return d, err
}

// buildTool builds pkg into bin from a tools module of the checkout, moduleDir.
func buildTool(moduleDir, bin, pkg string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(root, moduleDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %v\n%s", pkg, moduleDir, err, out)
	}
	return nil
}

// StartProgram starts another program than clusterflow in the background, as Start does.
func StartProgram(bin, dir, logDir, name string, env []string, args ...string) (*Process, error) {
	return startBinary(bin, "", dir, logDir, name, env, args...)
}

// RemoveBuilds deletes the binaries this process built; call it once no test needs them.
func RemoveBuilds() {
	for _, dir := range []string{binDir, toolsDir, temporalDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}

// TemporalTools are the Temporal server's own programs at the version clusterflow embeds:
// its entry point (what the temporalio/server image runs), its SQL schema tool (the
// admin-tools image's temporal-sql-tool) and the schema files that tool applies.
type TemporalTools struct {
	Server, SQLTool, SchemaDir string
}

var (
	temporalOnce  sync.Once
	temporalTools TemporalTools
	temporalErr   error
)

// Temporal builds the server's programs from the internal/tools/temporal module, once per
// test process. That module requires what the product's go.mod does, so the build reuses
// the packages the product's own build compiled.
func Temporal() (TemporalTools, error) {
	temporalOnce.Do(func() {
		dir, err := buildDir(&temporalDir, "clusterflow-temporal-")
		if err != nil {
			temporalErr = err
			return
		}
		const module = "internal/tools/temporal"
		// The names the images give them.
		tools := TemporalTools{Server: filepath.Join(dir, "temporal-server"), SQLTool: filepath.Join(dir, "temporal-sql-tool")}
		if temporalErr = buildTool(module, tools.Server, "go.temporal.io/server/cmd/server"); temporalErr != nil {
			return
		}
		if temporalErr = buildTool(module, tools.SQLTool, "go.temporal.io/server/cmd/tools/sql"); temporalErr != nil {
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			temporalErr = err
			return
		}
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server")
		cmd.Dir = filepath.Join(root, module)
		out, err := cmd.Output()
		if err != nil {
			temporalErr = fmt.Errorf("find go.temporal.io/server's source: %v", err)
			return
		}
		tools.SchemaDir = filepath.Join(strings.TrimSpace(string(out)), "schema")
		temporalTools = tools
	})
	return temporalTools, temporalErr
}
