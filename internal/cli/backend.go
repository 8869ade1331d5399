package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend/docker"
	"github.com/clusterflow/clusterflow/internal/backend/factory"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
)

// hostFlags are what a host's backend is built with, in the host's agent: the agent's
// flags, and those of a worker or dev that starts its agent itself and passes them on.
type hostFlags struct {
	backendName, data, secretsDir, portRange, dockerHost, publishAddress, memberAddress *string
	scripts                                                                             scriptUserFlags
	allowPrivileged                                                                     *string
	// shared is --shared-script-user: a host whose agent is not root runs every cluster's
	// scripts as the agent's user, which its operator must say is meant.
	shared *bool
	// memberCPUs, memberMemory and memberPIDs bound each member whose role sets no
	// resources of its own.
	memberCPUs   *float64
	memberMemory *string
	memberPIDs   *int
}

func (h *hostFlags) register(fs *pflag.FlagSet, forDev bool) {
	h.backendName = backendFlag(fs)
	h.data = fs.String("data", ".clusterflow/data", "folder for members and the backend's own state")
	secrets, usage := "/etc/clusterflow/secrets", "folder of secret files: a spec's {fromFile: F} reads DIR/NAMESPACE/CLUSTER/F on this host"
	if forDev {
		secrets = ".clusterflow/secrets"
	}
	h.secretsDir = fs.String("secrets-dir", secrets, usage)
	h.portRange = fs.String("port-range", "61000-63999", "ports this host gives members whose roles name ports (roles[].ports), LOW-HIGH")
	h.dockerHost = fs.String("docker-host", os.Getenv("DOCKER_HOST"), "the Docker engine's address for --backend docker, such as unix:///var/run/docker.sock (default $DOCKER_HOST, else that socket)")
	h.publishAddress = fs.String("publish-address", "127.0.0.1", "with --backend docker: the host address that the ports roles publish (roles[].publish) are bound to; 0.0.0.0 exposes them on every network of the host")
	h.memberAddress = fs.String("member-address", "name", "with --backend docker: how a cluster's members reach a member: name (its name, on its cluster's network of this host's engine: a cluster's members on one host) or host (this host's --host-address, every port of the member's published there, at --publish-address: a cluster's members on several hosts)")
	h.allowPrivileged = fs.String("allow-privileged", "", "with --backend docker: run the roles that ask for privileged containers (roles[].privileged), which hold every capability and device of the host, of these clusters alone: NAMESPACE/CLUSTER globs, comma-separated (prod/db-*); alone, every cluster's; refused by default")
	fs.Lookup("allow-privileged").NoOptDefVal = "*/*"
	h.scripts.register(fs)
	h.memberCPUs = fs.Float64("member-cpus", 0, "bound each member of a role that sets no resources.cpus to this many CPUs' time (0: unbounded)")
	h.memberMemory = fs.String("member-memory", "", "bound each member of a role that sets no resources.memory to this memory, such as 2Gi (empty: unbounded)")
	h.memberPIDs = fs.Int("member-pids", DefaultMemberPIDs, "bound each member of a role that sets no resources.pids to this many processes and threads, all of its scripts' together (0: unbounded)")
	h.shared = fs.Bool("shared-script-user", forDev, "not as root: run every cluster's startscripts as this process's own user, who can then read its credentials and every cluster's files (a developer's machine); a host of a fleet runs a root agent instead (deploy/systemd)")
}

// hostSettings are hostFlags as the agent runs with them.
type hostSettings struct {
	Backend    string `json:"backend"`
	Data       string `json:"data"`
	SecretsDir string `json:"secretsDir"`
	PortRange  string `json:"portRange"`
	DockerHost string `json:"dockerHost,omitempty"`
	// PublishAddress, AllowPrivileged and MembersAtHost are the docker backend's.
	// MemberResources bound each member whose role sets none.
	MemberResources runner.Resources    `json:"memberResources,omitzero"`
	PublishAddress  string              `json:"publishAddress,omitempty"`
	AllowPrivileged []string            `json:"allowPrivileged,omitempty"`
	MembersAtHost   bool                `json:"membersAtHost,omitempty"`
	Scripts         factory.ScriptUsers `json:"scripts"`
}

// settings checks the flags and chooses who runs scripts.
func (h *hostFlags) settings(logger *zap.Logger) (hostSettings, error) {
	if err := checkBackend(*h.backendName); err != nil {
		return hostSettings{}, err
	}
	s := hostSettings{Backend: *h.backendName, PortRange: *h.portRange}
	if s.Backend == "docker" {
		s.DockerHost = *h.dockerHost
		var err error
		if s.AllowPrivileged, err = docker.ParsePrivileged(*h.allowPrivileged); err != nil {
			return s, apperr.Errorf(apperr.Invalid, "--allow-privileged: %v", err)
		}
		address, err := netip.ParseAddr(*h.publishAddress)
		if err != nil {
			return s, apperr.Errorf(apperr.Invalid, "--publish-address %q: not an IP address of this host (127.0.0.1 keeps published ports on loopback; 0.0.0.0 is every address)", *h.publishAddress)
		}
		s.PublishAddress = address.String()
		switch *h.memberAddress {
		case "name":
		case "host":
			if address.IsLoopback() {
				return s, apperr.Errorf(apperr.Invalid, "--member-address host: members are then reached at this host's address, so their ports must be published where other hosts reach them; give --publish-address this host's address (or 0.0.0.0), not %s", address)
			}
			s.MembersAtHost = true
		default:
			return s, apperr.Errorf(apperr.Invalid, "--member-address %q: it is name (a member is reached by its name, on its cluster's network of this host's engine) or host (at this host's address)", *h.memberAddress)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = docker.Ping(ctx, s.DockerHost)
		cancel()
		if err != nil {
			return s, apperr.Wrap(apperr.Unavailable, err)
		}
	} else {
		for _, f := range []struct {
			flag string
			set  bool
		}{
			{"--docker-host", *h.dockerHost != "" && *h.dockerHost != os.Getenv("DOCKER_HOST")},
			{"--publish-address", *h.publishAddress != "127.0.0.1"},
			{"--allow-privileged", *h.allowPrivileged != ""},
			{"--member-address", *h.memberAddress != "name"},
		} {
			if f.set {
				return s, apperr.Errorf(apperr.Invalid, "%s is for --backend docker, not %s", f.flag, s.Backend)
			}
		}
	}
	var err error
	if s.MemberResources, err = h.memberResources(); err != nil {
		return s, err
	}
	if s.Data, err = filepath.Abs(*h.data); err != nil {
		return s, err
	}
	if *h.secretsDir != "" {
		if s.SecretsDir, err = filepath.Abs(*h.secretsDir); err != nil {
			return s, err
		}
	}
	if s.Scripts, err = h.scripts.choose(s.Data, logger); err != nil {
		return s, err
	}
	if os.Geteuid() != 0 && !*h.shared {
		me := strconv.Itoa(os.Geteuid())
		if u, err := user.Current(); err == nil {
			me = u.Username
		}
		return s, apperr.Errorf(apperr.Invalid, "this process runs as %s, not root, so the host's startscripts would all run as %s: any cluster's script could read this worker's Temporal credentials (/proc/%d/environ), its codec keys and every other cluster's files. "+
			"Run the host's agent as root (deploy/systemd/clusterflow-agent.service) and point the worker at it with --agent-socket, or say that is meant with --shared-script-user", me, me, os.Getpid())
	}
	return s, nil
}

// DefaultMemberPIDs bounds each member's processes and threads unless told otherwise: more
// than a database or a JVM runs, fewer than a fork bomb needs to starve the host.
const DefaultMemberPIDs = 4096

// memberResources reads --member-cpus, --member-memory and --member-pids.
func (h *hostFlags) memberResources() (runner.Resources, error) {
	r := runner.Resources{CPUs: *h.memberCPUs, PIDs: *h.memberPIDs}
	switch {
	case r.CPUs < 0 || r.CPUs > 1024:
		return r, apperr.Errorf(apperr.Invalid, "--member-cpus %g: it must be from 0 to 1024", r.CPUs)
	case r.PIDs < 0 || (r.PIDs > 0 && r.PIDs < 16):
		return r, apperr.Errorf(apperr.Invalid, "--member-pids %d: it must be 0 (unbounded) or at least 16", r.PIDs)
	}
	if *h.memberMemory != "" {
		m, ok := spec.ParseMemory(*h.memberMemory)
		if !ok || m < 6<<20 {
			return r, apperr.Errorf(apperr.Invalid, "--member-memory %q: want a size of at least 6Mi, such as 512Mi or 2Gi", *h.memberMemory)
		}
		r.Memory = m
	}
	return r, nil
}

// digest tells agents started with other settings apart (agent.Client.Settings).
func (s hostSettings) digest() string {
	data, _ := json.Marshal(s)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// agentArgs are the agent's flags for the same settings, for a worker that starts its
// agent: each is given, so that the agent reads nothing of its own environment.
func (h *hostFlags) agentArgs(s hostSettings) []string {
	args := []string{"--backend", s.Backend, "--data", s.Data, "--secrets-dir", s.SecretsDir, "--port-range", s.PortRange,
		"--member-cpus", strconv.FormatFloat(s.MemberResources.CPUs, 'g', -1, 64), "--member-pids", strconv.Itoa(s.MemberResources.PIDs),
		"--allow-root-scripts=" + strconv.FormatBool(h.scripts.allowRoot), "--shared-script-user=" + strconv.FormatBool(*h.shared)}
	if s.DockerHost != "" {
		args = append(args, "--docker-host", s.DockerHost)
	}
	if s.Backend == "docker" {
		args = append(args, "--publish-address", s.PublishAddress)
		if len(s.AllowPrivileged) > 0 {
			args = append(args, "--allow-privileged="+strings.Join(s.AllowPrivileged, ","))
		}
		if s.MembersAtHost {
			args = append(args, "--member-address", "host")
		}
	}
	if s.MemberResources.Memory > 0 {
		args = append(args, "--member-memory", strconv.FormatInt(s.MemberResources.Memory, 10))
	}
	if h.scripts.uids != "" {
		args = append(args, "--script-uids", h.scripts.uids)
	}
	if h.scripts.user != "" {
		args = append(args, "--script-user", h.scripts.user)
	}
	return args
}

// agentOptions are a worker's for reaching the agent it starts itself, with these
// settings, or the one at socket.
func (h *hostFlags) agentOptions(s hostSettings, socket string, com common) (factory.Options, error) {
	o := factory.Options{Data: s.Data, AgentSocket: socket}
	if socket != "" {
		return o, nil
	}
	self, err := os.Executable()
	if err != nil {
		return o, fmt.Errorf("find the clusterflow binary to start the agent with: %w", err)
	}
	o.AgentCommand = append(append([]string{self, "agent"}, h.agentArgs(s)...), "--log-format", com.logFormat, "--log-level", com.logLevel, "--dir")
	o.AgentSettings = s.digest()
	return o, nil
}

// openHost builds the host's backend in the agent.
func (s hostSettings) openHost(logger *zap.Logger) (agent.HostBackend, error) {
	return factory.OpenHost(s.Backend, factory.HostOptions{Data: s.Data, SecretsDir: s.SecretsDir, Scripts: s.Scripts, PortRange: s.PortRange, DockerHost: s.DockerHost, PublishAddress: s.PublishAddress, AllowPrivileged: s.AllowPrivileged, MembersAtHost: s.MembersAtHost, MemberResources: s.MemberResources, Logger: logger})
}

// checkBackend refuses a backend no host has.
func checkBackend(name string) error {
	if !factory.Known(name) {
		return apperr.Errorf(apperr.Invalid, "--backend %q: unknown; the backends are %s", name, strings.Join(factory.Names, ", "))
	}
	return nil
}

// backendFlag is --backend, which names where members live.
func backendFlag(fs *pflag.FlagSet) *string {
	return fs.String("backend", factory.Default, "where members live: "+strings.Join(factory.Names, ", ")+" (local: a sandbox folder per member under --data, scripts run by the host's agent; docker: a container per member from its role's image, on a network of its cluster)")
}

// scriptUserFlags say who runs startscripts on a worker that runs as root: by default a
// user per cluster from DefaultScriptUIDs, never root itself unless allowed.
type scriptUserFlags struct {
	user, uids string
	allowRoot  bool
}

// DefaultScriptUIDs are the users a root worker (or dev) gives clusters when told nothing
// else: the gap systemd leaves between the users it maps into containers (60514-60577) and
// its DynamicUser= ones (61184-65519), so that no service of the host is ever given a
// cluster's number.
const DefaultScriptUIDs = "60600-61183"

// allowRootScriptsEnv stands for --allow-root-scripts, for whoever starts workers in bulk.
const allowRootScriptsEnv = "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS"

// register adds the flags: as root, dev and a worker of a fleet alike give each cluster a
// user of its own unless told to run scripts as root.
func (f *scriptUserFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.uids, "script-uids", "", "as root, run each cluster's startscripts as a user of its own from FIRST-LAST (default "+DefaultScriptUIDs+"); no cluster reaches another's files")
	fs.StringVar(&f.user, "script-user", "", "as root, run every startscript as this one unprivileged user instead")
	fs.BoolVar(&f.allowRoot, "allow-root-scripts", os.Getenv(allowRootScriptsEnv) == "1", "as root, run startscripts as root too (default $"+allowRootScriptsEnv+"=1): any cluster's script can then act as the host")
}

// choose says who runs the backend's scripts. As root, that is a user per cluster unless
// another user or root itself is asked for; as anyone else, that user, since only root
// may start processes as others. Script users need the data folder, and every folder
// above it, to let other users through (o+x), since their sandboxes live there.
func (f *scriptUserFlags) choose(data string, logger *zap.Logger) (factory.ScriptUsers, error) {
	switch {
	case f.user != "" && f.uids != "":
		return factory.ScriptUsers{}, apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: give one or the other")
	case (f.user != "" || f.uids != "") && os.Geteuid() != 0:
		return factory.ScriptUsers{}, apperr.Errorf(apperr.Invalid, "--script-user and --script-uids: starting scripts as another user needs the worker to run as root")
	case os.Geteuid() != 0:
		return factory.ScriptUsers{}, nil // scripts run as this unprivileged user
	case f.allowRoot && f.user == "" && f.uids == "": // a user asked for outranks the allowance
		logger.Warn("Startscripts run as root, as this worker does (--allow-root-scripts): any cluster's script can act as the host")
		return factory.ScriptUsers{}, nil
	}
	if err := traversable(data); err != nil {
		return factory.ScriptUsers{}, err
	}
	if f.user != "" {
		u, err := scriptUser(f.user)
		return factory.ScriptUsers{User: u}, err
	}
	uids := f.uids
	if uids == "" {
		uids = DefaultScriptUIDs
	}
	first, last, ok := strings.Cut(uids, "-")
	lo, err1 := strconv.ParseUint(first, 10, 32)
	hi, err2 := strconv.ParseUint(last, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return factory.ScriptUsers{}, apperr.Errorf(apperr.Invalid, "--script-uids %q: want FIRST-LAST, such as %s", uids, DefaultScriptUIDs)
	}
	if lo == 0 || hi < lo {
		return factory.ScriptUsers{}, apperr.Errorf(apperr.Invalid, "--script-uids: %d-%d is not a range of unprivileged user IDs (FIRST-LAST, FIRST above 0)", lo, hi)
	}
	return factory.ScriptUsers{PerCluster: true, FirstUID: uint32(lo), LastUID: uint32(hi)}, nil
}

// traversable checks that other users may pass through data and every folder above it.
func traversable(data string) error {
	abs, err := filepath.Abs(data)
	if err != nil {
		return err
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o001 == 0 {
			return apperr.Errorf(apperr.Invalid, "this worker runs as root, so its startscripts run as users of their own, and %s (mode %04o) does not let them through to their sandboxes under --data %s: chmod o+x it, or run scripts as root with --allow-root-scripts", dir, info.Mode().Perm(), data)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// scriptUser looks up --script-user, which must not be root.
func scriptUser(name string) (*runner.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: uid %q and gid %q are not numbers", name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, apperr.Errorf(apperr.Invalid, "--script-user %s: is root; name an unprivileged user", name)
	}
	return &runner.User{UID: uint32(uid), GID: uint32(gid)}, nil
}
