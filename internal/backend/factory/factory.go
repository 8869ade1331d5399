// Package factory builds the member backend a worker is told to use by name
// (worker --backend). It is the one place that knows every backend: the worker, the
// activities and the workflows know only the seam (internal/backend).
package factory

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/local"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// Default is the backend a worker uses when told none.
const Default = "local"

// Names are the backends Open builds.
var Names = []string{"local"}

// Options are everything a backend may need. Each backend reads its own and ignores the
// rest.
type Options struct {
	// Data is the folder the backend keeps members and its own state in.
	Data string
	// SecretsDir holds each cluster's secret files, in a folder named after the cluster.
	SecretsDir string
	// Host names the host the backend runs on, and Address is the address it registered;
	// both empty in single-host mode.
	Host, Address string
	// Owner is the ID of the Temporal namespace the worker serves: what the backend makes
	// is marked its own, and it removes nothing another owns.
	Owner string
	// Connection is how whatever completes script activities reaches Temporal.
	Connection agent.Connection
	// AgentCommand starts the local backend's agent when none is running; the agent's
	// folder follows its last argument.
	AgentCommand []string
	// Scripts says who startscripts run as.
	Scripts ScriptUsers
	// PortRange is where members' ports come from, LOW-HIGH; empty: the backend's default.
	PortRange string
}

// ScriptUsers says who startscripts run as: one user for all, a user per cluster from a
// range of IDs, or (both unset) the worker's own user.
type ScriptUsers struct {
	User       *runner.User
	FirstUID   uint32
	LastUID    uint32
	PerCluster bool
}

// Open builds the backend of that name.
func Open(name string, o Options) (backend.Backend, error) {
	switch name {
	case "local":
		return openLocal(o)
	default:
		return nil, fmt.Errorf("unknown backend %q; the backends are %s", name, strings.Join(Names, ", "))
	}
}

// Known says whether Open builds a backend of that name.
func Known(name string) bool { return slices.Contains(Names, name) }

func openLocal(o Options) (*local.Backend, error) {
	l, err := local.New(o.Data, o.AgentCommand...)
	if err != nil {
		return nil, err
	}
	l.SecretsDir, l.Host, l.Address, l.Owner, l.Connection = o.SecretsDir, o.Host, o.Address, o.Owner, o.Connection
	if o.PortRange != "" {
		if l.Ports, err = local.ParsePortRange(o.PortRange); err != nil {
			return nil, err
		}
	}
	l.ScriptUser = o.Scripts.User
	if o.Scripts.PerCluster {
		if err := l.UseScriptUIDs(o.Scripts.FirstUID, o.Scripts.LastUID); err != nil {
			return nil, err
		}
	}
	return l, nil
}
