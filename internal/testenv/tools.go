package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

var (
	toolsDir         string
	alertmanagerOnce sync.Once
	alertmanagerBin  string
	alertmanagerErr  error
)

// Alertmanager builds Prometheus Alertmanager from the tools module (internal/tools), once
// per test process, and returns its path. A failed build fails the test that needs it.
func Alertmanager() (string, error) {
	alertmanagerOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			alertmanagerErr = err
			return
		}
		dir, err := os.MkdirTemp("", "clusterflow-tools-")
		if err != nil {
			alertmanagerErr = err
			return
		}
		toolsDir = dir
		alertmanagerBin = filepath.Join(dir, "alertmanager")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", alertmanagerBin, "github.com/prometheus/alertmanager/cmd/alertmanager")
		cmd.Dir = filepath.Join(root, "internal", "tools")
		if out, err := cmd.CombinedOutput(); err != nil {
			alertmanagerErr = fmt.Errorf("build alertmanager in internal/tools: %v\n%s", err, out)
		}
	})
	return alertmanagerBin, alertmanagerErr
}

// StartProgram starts another program than clusterflow in the background, as Start does.
func StartProgram(bin, dir, logDir, name string, env []string, args ...string) (*Process, error) {
	return startBinary(bin, "", dir, logDir, name, env, args...)
}

// RemoveBuilds deletes the binaries this process built; call it once no test needs them.
func RemoveBuilds() {
	for _, dir := range []string{binDir, toolsDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}
