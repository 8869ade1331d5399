package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// localBackend keeps members under data, reads secret references from secretsDir, and
// starts this very binary as their agent when none is running.
func localBackend(data, secretsDir string, com common) (*backend.Local, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the clusterflow binary to start the agent with: %w", err)
	}
	local, err := backend.NewLocal(data, self, "agent", "--log-format", com.logFormat, "--log-level", com.logLevel, "--dir")
	if err != nil {
		return nil, err
	}
	if secretsDir != "" {
		if local.SecretsDir, err = filepath.Abs(secretsDir); err != nil {
			return nil, err
		}
	}
	return local, nil
}
