package cli

import (
	"fmt"
	"os"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// localBackend keeps members under data and starts this very binary as their agent when
// none is running.
func localBackend(data string, com common) (*backend.Local, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the clusterflow binary to start the agent with: %w", err)
	}
	return backend.NewLocal(data, self, "agent", "--log-format", com.logFormat, "--log-level", com.logLevel, "--dir")
}
