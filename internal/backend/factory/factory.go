// Package factory builds the member backend a host is told to use by name
// (--backend). It is the one place that knows every backend: the worker, the activities
// and the workflows know only the seam (internal/backend).
//
// A host's backend lives in its agent (OpenHost), the one part of the host that may act as
// other users; its worker reaches it through the agent's socket (Open).
package factory

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/docker"
	"github.com/clusterflow/clusterflow/internal/backend/local"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// Default is the backend a worker uses when told none.
const Default = "local"

// Names are the backends OpenHost builds.
var Names = []string{"local", "docker"}

// Known says whether OpenHost builds a backend of that name.
func Known(name string) bool { return slices.Contains(Names, name) }

// Options are what a worker needs to reach its host's backend.
type Options struct {
	// Data is the host's data folder: the agent's folder is in it.
	Data string
	// AgentSocket, when set, is the socket of an agent the host runs as a service of its
	// own (deploy/systemd), which the worker never starts; otherwise AgentCommand starts the
	// agent when none is running (its folder follows its last argument), and an agent
	// answering with other settings than AgentSettings is replaced.
	AgentSocket   string
	AgentCommand  []string
	AgentSettings string
	// Worker is what the worker tells its agent of itself with each call.
	Worker agent.Worker
}

// Open returns the worker's backend: its host's agent, which holds the real one.
func Open(name string, o Options) (backend.Backend, error) {
	if !Known(name) {
		return nil, unknown(name)
	}
	client := &agent.Client{Dir: local.AgentDir(o.Data), Socket: o.AgentSocket, Settings: o.AgentSettings}
	if o.AgentSocket == "" {
		client.Command = append(slices.Clone(o.AgentCommand), client.Dir)
		// The agent this worker starts keeps its folder there; made now, as an operator
		// may want to set its mode before the first member arrives.
		if err := os.MkdirAll(o.Data, 0o755); err != nil {
			return nil, fmt.Errorf("create data folder: %w", err)
		}
	}
	// The worker reads its connection's files itself: the agent reads none a caller names.
	w := o.Worker
	var err error
	if w.Connection, err = w.Connection.Inline(); err != nil {
		return nil, err
	}
	remote := &agent.RemoteBackend{Client: client, Worker: w}
	if name == "docker" {
		remote.AddressOf = docker.MemberAddress
	}
	return remote, nil
}

// HostOptions are what the host's backend is built with, in its agent.
type HostOptions struct {
	// Data is the folder the backend keeps members and its own state in.
	Data string
	// SecretsDir holds each namespace's clusters' secret files.
	SecretsDir string
	// Scripts says who startscripts run as.
	Scripts ScriptUsers
	// PortRange is where members' ports come from, LOW-HIGH; empty: the backend's default.
	PortRange string
	// DockerHost is the Docker engine's address for the docker backend (empty:
	// DOCKER_HOST, or the engine's default socket).
	DockerHost string
	// PublishAddress is where a docker host publishes the ports roles name in publish
	// (empty: loopback); AllowPrivileged are the clusters (NAMESPACE/CLUSTER globs) whose
	// roles may ask for privileged containers.
	PublishAddress  string
	AllowPrivileged []string
	// MembersAtHost reaches a docker host's members at its address, every port of theirs
	// published (at PublishAddress), rather than by name on their cluster's network.
	MembersAtHost bool
	// MemberResources bound each member whose role sets none; what the host cannot bound
	// is dropped, saying so.
	MemberResources runner.Resources
	Logger          *zap.Logger
}

// ScriptUsers says who startscripts run as: one user for all, a user per cluster from a
// range of IDs, or (both unset) the agent's own user.
type ScriptUsers struct {
	User       *runner.User
	FirstUID   uint32
	LastUID    uint32
	PerCluster bool
}

// OpenHost builds the host's backend of that name, for its agent to serve.
func OpenHost(name string, o HostOptions) (agent.HostBackend, error) {
	switch name {
	case "local":
		return openLocal(o)
	case "docker":
		l, err := openLocal(o)
		if err != nil {
			return nil, err
		}
		d, err := docker.New(l, o.DockerHost, o.Logger)
		if err != nil {
			return nil, err
		}
		if o.PublishAddress != "" {
			if d.PublishAddress, err = netip.ParseAddr(o.PublishAddress); err != nil {
				return nil, fmt.Errorf("publish address %q: %w", o.PublishAddress, err)
			}
		}
		d.AllowPrivileged = o.AllowPrivileged
		if o.MembersAtHost {
			d.SetAtHostAddress(d.PublishAddress)
		}
		return d, nil
	default:
		return nil, unknown(name)
	}
}

func unknown(name string) error {
	return fmt.Errorf("unknown backend %q; the backends are %s", name, strings.Join(Names, ", "))
}

func openLocal(o HostOptions) (*local.Backend, error) {
	l, err := local.New(o.Data)
	if err != nil {
		return nil, err
	}
	l.SecretsDir, l.Log = o.SecretsDir, o.Logger
	l.MemberResources = o.MemberResources
	if missing := runner.Unbounded(o.MemberResources); len(missing) > 0 && o.Logger != nil {
		o.Logger.Warn("This host cannot bound members' " + strings.Join(missing, ", ") + " (no cgroup controller it may use): its defaults for them are not kept; a role that asks for them is refused")
		drop := func(c string) bool { return slices.Contains(missing, c) }
		if drop("cpu") {
			l.MemberResources.CPUs = 0
		}
		if drop("memory") {
			l.MemberResources.Memory = 0
		}
		if drop("pids") {
			l.MemberResources.PIDs = 0
		}
	}
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
