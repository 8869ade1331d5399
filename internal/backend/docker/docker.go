// Package docker is the backend that runs each member as a container of its own, through a
// Docker Engine's API: the member's image, its own address on a network of its cluster,
// its own volumes. It keeps the local backend's folders for everything that is the host's
// (the cluster's scripts, envs and configmeta, each member's logs and records, secrets and
// owners), so that runs are launched, watched, stopped and adopted by the host's agent as
// on the local backend; what changes is where a member is and where its scripts run:
// inside its container, by the engine's exec (see Exec).
package docker

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/local"
	"github.com/clusterflow/clusterflow/spec"
)

// Labels every container, network and volume of a member or cluster carries: a listing
// finds a cluster's by them, and an operator's `docker ps --filter label=...` too.
const (
	LabelCluster   = "io.clusterflow.cluster" // the cluster's key: NAME or NAME@HOME
	LabelMember    = "io.clusterflow.member"
	LabelRole      = "io.clusterflow.role"
	LabelHome      = "io.clusterflow.home"
	LabelNamespace = "io.clusterflow.namespace" // the owning namespace's ID
	// LabelUser is who the member's scripts run as in its container (uid:gid; empty: the
	// image's user).
	LabelUser = "io.clusterflow.user"
)

// keepAlive is every member container's main process: the member is its scripts and what
// they start, not the image's entrypoint, so the container only has to stay up (with the
// engine's init as PID 1, reaping what daemons leave).
var keepAlive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}

// Backend runs members as containers. Its local backend holds the host's folders.
type Backend struct {
	*local.Backend
	engine *client.Client
	// Engine is the engine's address (DOCKER_HOST's form), which scripts' runs are told.
	Engine string
	// networks serializes making a cluster's network: an engine of API 1.41 makes a second
	// network of the same name rather than refuse it.
	networks *sync.Mutex
	// pulls are what each member's launch is pulling, by container name (LaunchProgress).
	pulls *pullProgress
	log   *zap.Logger
	// PublishAddress is where the host publishes the ports roles name in publish.
	PublishAddress netip.Addr
	// AtHostAddress says members are reached at their host's address, where every port of
	// theirs is published (SetAtHostAddress), rather than by name on their cluster's
	// network of this engine alone.
	AtHostAddress bool
	// AllowPrivileged are the clusters, as NAMESPACE/CLUSTER globs, whose roles may ask for
	// privileged containers; a host refuses every other's.
	AllowPrivileged []string
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ agent.HostBackend = (*Backend)(nil)
)

// New returns a backend on the engine at engineHost (empty: DOCKER_HOST, or the engine's
// default socket), keeping the host's folders in l.
func New(l *local.Backend, engineHost string, log *zap.Logger) (*Backend, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if engineHost != "" {
		opts = append(opts, client.WithHost(engineHost))
	}
	engine, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker engine at %q: %w", engineHost, err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	d := &Backend{Backend: l, engine: engine, Engine: engine.DaemonHost(), networks: &sync.Mutex{}, pulls: &pullProgress{byContainer: map[string]string{}}, log: log, PublishAddress: netip.MustParseAddr("127.0.0.1")}
	l.AddressOf = MemberAddress
	return d, nil
}

// Ping checks that the engine at engineHost (empty: DOCKER_HOST, or the engine's default
// socket) answers, for a host to say so at its start rather than at its first member.
func Ping(ctx context.Context, engineHost string) error {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if engineHost != "" {
		opts = append(opts, client.WithHost(engineHost))
	}
	engine, err := client.New(opts...)
	if err != nil {
		return fmt.Errorf("docker engine at %q: %w", engineHost, err)
	}
	defer engine.Close()
	if _, err := engine.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("the Docker engine at %s does not answer (--docker-host, DOCKER_HOST): %w", engine.DaemonHost(), err)
	}
	return nil
}

// MemberAddress is how a member's cluster reaches it: its name, which the engine's DNS
// answers on the cluster's network with the member's own address.
func MemberAddress(m backend.MemberRef, _ string) string { return m.Name }

// SetAtHostAddress makes members reached at their host's address, as on the local
// backend, with every port of theirs published there (at publish, which other hosts must
// reach: not loopback): members of a cluster on several hosts' engines reach each other
// so, where a cluster's network is one engine's.
func (d *Backend) SetAtHostAddress(publish netip.Addr) {
	d.AtHostAddress, d.PublishAddress = true, publish
	d.Backend.AddressOf = nil
}

// UseLauncher implements agent.HostBackend.
func (d *Backend) UseLauncher(launcher agent.Launcher) {
	d.Backend.UseLauncher(entering{next: launcher, engine: d.engine, host: d.Engine})
}

// For implements agent.HostBackend.
func (d *Backend) For(w agent.Worker) backend.Backend {
	c := *d
	c.Backend = d.Backend.For(w).(*local.Backend)
	return &c
}

// entering runs every launch in its member's container (agent.Script.Enter).
type entering struct {
	next   agent.Launcher
	engine *client.Client
	host   string
}

func (e entering) Launch(ctx context.Context, l agent.Launch) (agent.Reply, error) {
	name := containerName(backend.ClusterRef{Name: l.Cluster, Home: l.Home}, l.Member)
	got, err := e.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return agent.Reply{}, fmt.Errorf("inspect container %s: %w", name, err)
	}
	l.Script.Enter = &agent.Enter{Engine: e.host, Container: name, User: got.Container.Config.Labels[LabelUser]}
	if l.Probe != nil {
		probe := *l.Probe
		probe.Script.Enter = l.Script.Enter
		l.Probe = &probe
	}
	return e.next.Launch(ctx, l)
}

func (e entering) Stop(ctx context.Context, s agent.Stop) (agent.Reply, error) {
	return e.next.Stop(ctx, s)
}

// checkHostName refuses a member whose name cannot be its container's host name and the
// name its cluster's DNS answers: a cluster's and a role's names may be 63 characters each,
// a DNS label no more.
func checkHostName(member string) error {
	if err := spec.CheckName(member); err != nil {
		return &backend.RefusedError{Reason: fmt.Sprintf("member name %v: on the docker backend it is the container's host name and its name on the cluster's network; shorten the cluster's or the role's name", err)}
	}
	return nil
}

// containerName names a member's container, unique on the host: a cluster's key is.
func containerName(c backend.ClusterRef, member string) string {
	if c.Home == "" {
		return "cf-" + member
	}
	return "cf-" + member + "." + c.Home
}

// networkName names the cluster's network on the host.
func networkName(c backend.ClusterRef) string { return "cf-" + strings.ReplaceAll(c.Key(), "@", ".") }

// volumeName names a member's volume for its role's i-th path.
func volumeName(c backend.ClusterRef, member string, i int) string {
	return containerName(c, member) + "-" + strconv.Itoa(i)
}

// LaunchScript implements backend.Backend: the member's container is made (a configure)
// or started (any other event, after a reboot say) before its script is run in it.
func (d *Backend) LaunchScript(ctx context.Context, run backend.ScriptRun, to backend.Completion) error {
	if run.Container == nil || run.Container.Image == "" {
		return &backend.RefusedError{Reason: fmt.Sprintf("role %s names no image; this host's backend is docker, which runs each member from its role's image (roles[].image)", run.Member.Role)}
	}
	want := *run.Container
	run.Container = nil // the local backend runs the script; the container is this one's
	if err := checkHostName(run.Member.Name); err != nil {
		return err
	}
	if want.Privileged && !d.privilegedAllowed(run.Member.Cluster) {
		return &backend.RefusedError{Reason: fmt.Sprintf("role %s asks for privileged containers (roles[].privileged), which this host does not run for cluster %s of namespace %s; its operator allows them with --allow-privileged %s/%s", run.Member.Role, run.Member.Cluster, d.Namespace, d.Namespace, run.Member.Cluster)}
	}
	if err := d.checkUser(run.Member, want.User); err != nil {
		return err
	}
	if err := d.RefuseElsewhere(run.Member.Folder()); err != nil {
		return err
	}
	if run.Event == spec.EventConfigure {
		if err := d.Backend.CreateMember(ctx, run.Member); err != nil {
			return fmt.Errorf("create member %s: %w", run.Member.Name, err)
		}
		if err := d.create(ctx, run.Member, want, run.Ports); err != nil {
			return err
		}
	} else if err := d.start(ctx, run.Member); err != nil {
		return err
	}
	return d.Backend.LaunchScript(ctx, run, to)
}

// create makes the member's container, its volumes and its cluster's network, as need be,
// and starts it, publishing those of the member's ports that want.Publish names (every one
// when members are reached at their host's address). It is idempotent.
func (d *Backend) create(ctx context.Context, m backend.MemberRef, want spec.Container, ports map[string]int) error {
	name := containerName(m.Folder(), m.Name)
	if _, err := d.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err == nil {
		return d.start(ctx, m)
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect container %s: %w", name, err)
	}
	if err := d.pull(ctx, name, want.Image); err != nil {
		return err
	}
	net, err := d.network(ctx, m.Folder())
	if err != nil {
		return err
	}
	sandbox, err := d.Sandbox(m)
	if err != nil {
		return err
	}
	files, err := d.FilesDir(m.Folder())
	if err != nil {
		return err
	}
	user, err := d.containerUser(m, want, sandbox)
	if err != nil {
		return err
	}
	labels := d.labels(m.Folder())
	labels[LabelMember], labels[LabelRole], labels[LabelUser] = m.Name, m.Role, user
	// The member sees its own folder, where the local backend keeps a member's files, and
	// its cluster's scripts and configmeta, read-only, at the paths the host has them at, so
	// that every path a script is told holds inside as outside.
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: sandbox, Target: sandbox},
		{Type: mount.TypeBind, Source: files, Target: files, ReadOnly: true},
	}
	for i, path := range want.Volumes {
		volume := volumeName(m.Folder(), m.Name, i)
		if _, err := d.engine.VolumeCreate(ctx, client.VolumeCreateOptions{Name: volume, Labels: labels}); err != nil {
			return fmt.Errorf("create volume %s: %w", volume, err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: volume, Target: path})
	}
	publish := want.Publish
	if d.AtHostAddress {
		publish = slices.Sorted(maps.Keys(ports))
	}
	exposed, published, err := d.publish(m, publish, ports)
	if err != nil {
		return err
	}
	init := true
	host := &container.HostConfig{
		Mounts:       mounts,
		NetworkMode:  container.NetworkMode(net),
		PortBindings: published,
		Init:         &init,
		// The engine's default capabilities, and none gained through a setuid file.
		SecurityOpt: []string{"no-new-privileges"},
		Privileged:  want.Privileged,
	}
	host.NanoCPUs = int64(want.Resources.CPUs * 1e9)
	host.Memory = want.Resources.Memory
	if want.Resources.PIDs > 0 {
		pids := int64(want.Resources.PIDs)
		host.PidsLimit = &pids
	}
	// The container's own process is root's when the member has a user, so that its
	// volumes can be given to that user (an exec as root in a container of another user
	// gets no capability under no-new-privileges); its scripts run as the member's user.
	mainUser := ""
	if user != "" {
		mainUser = "0:0"
	}
	_, err = d.engine.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: want.Image, Hostname: m.Name, User: mainUser, Labels: labels,
			Entrypoint: keepAlive, WorkingDir: sandbox, ExposedPorts: exposed,
		},
		HostConfig: host,
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			net: {Aliases: []string{m.Name}},
		}},
	})
	if err != nil && !cerrdefs.IsConflict(err) { // a relaunch's create may meet its first's
		return &backend.RefusedError{Reason: fmt.Sprintf("create container %s from %s: %v", name, want.Image, err)}
	}
	if err := d.start(ctx, m); err != nil {
		return err
	}
	return d.giveVolumes(ctx, name, user, want.Volumes)
}

// publish binds each named port of the member's to the same number on the host's publish
// address: the member's ports are distinct on its host (AssignPorts), so a published one
// is found where status and configmeta say, at its host's address rather than the member's.
func (d *Backend) publish(m backend.MemberRef, names []string, ports map[string]int) (network.PortSet, network.PortMap, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	exposed, published := network.PortSet{}, network.PortMap{}
	for _, name := range names {
		number, ok := ports[name]
		if !ok {
			return nil, nil, &backend.RefusedError{Reason: fmt.Sprintf("role %s publishes port %q, which member %s was not given", m.Role, name, m.Name)}
		}
		port, _ := network.PortFrom(uint16(number), network.TCP)
		exposed[port] = struct{}{}
		published[port] = []network.PortBinding{{HostIP: d.PublishAddress, HostPort: strconv.Itoa(number)}}
	}
	return exposed, published, nil
}

// giveVolumes makes the member's volumes its user's: the engine makes a new volume as the
// image has its path, root's when the image lacks it.
func (d *Backend) giveVolumes(ctx context.Context, name, user string, paths []string) error {
	if user == "" || len(paths) == 0 {
		return nil
	}
	created, err := d.engine.ExecCreate(ctx, name, client.ExecCreateOptions{
		User: "0:0", Cmd: append([]string{"chown", user}, paths...), AttachStderr: true,
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, // an imported image may have none
	})
	if err == nil {
		var attached client.ExecAttachResult
		if attached, err = d.engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{}); err == nil {
			var out strings.Builder
			_, _ = stdcopy.StdCopy(io.Discard, &out, attached.Reader)
			attached.Close()
			var got client.ExecInspectResult
			if got, err = d.engine.ExecInspect(ctx, created.ID, client.ExecInspectOptions{}); err == nil && got.ExitCode != 0 {
				err = fmt.Errorf("chown exited %d: %s", got.ExitCode, strings.TrimSpace(out.String()))
			}
		}
	}
	if err != nil {
		return &backend.RefusedError{Reason: fmt.Sprintf("give the volumes of container %s to user %s: %v", name, user, err)}
	}
	return nil
}

// ParsePrivileged reads --allow-privileged: NAMESPACE/CLUSTER globs, comma-separated.
func ParsePrivileged(list string) ([]string, error) {
	var globs []string
	for _, g := range strings.Split(list, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		ns, cluster, ok := strings.Cut(g, "/")
		if !ok || ns == "" || cluster == "" {
			return nil, fmt.Errorf("%q is not NAMESPACE/CLUSTER (globs allowed: prod/db-*, */*)", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("%q: %v", g, err)
		}
		globs = append(globs, g)
	}
	return globs, nil
}

// privilegedAllowed says whether the cluster, of the calling worker's namespace, may run
// privileged containers here.
func (d *Backend) privilegedAllowed(cluster string) bool {
	for _, g := range d.AllowPrivileged {
		if ok, _ := path.Match(g, d.Namespace+"/"+cluster); ok {
			return true
		}
	}
	return false
}

// parseUser reads a role's container user, uid[:gid].
func parseUser(user string) (uid, gid int, err error) {
	u, g, hasGroup := strings.Cut(user, ":")
	if !hasGroup {
		g = u
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%q is not uid[:gid]", user)
	}
	return uid, gid, nil
}

// checkUser refuses, by name, a role's container user that is root (the member's folder,
// given to it, is the host's), that does not parse, or that is another cluster's script
// user on this host, whose files it would own.
func (d *Backend) checkUser(m backend.MemberRef, user string) error {
	if user == "" {
		return nil
	}
	uid, gid, err := parseUser(user)
	switch {
	case err != nil:
		return &backend.RefusedError{Reason: fmt.Sprintf("role %s's user %v", m.Role, err)}
	case uid == 0 || gid == 0:
		return &backend.RefusedError{Reason: fmt.Sprintf("role %s's user %s is root's, to whom this host would give the member's folder: name an unprivileged uid[:gid]", m.Role, user)}
	}
	if first, last, ok := d.ScriptUIDRange(); ok && uint32(uid) >= first && uint32(uid) <= last {
		own, err := d.ScriptUserOf(m.Folder())
		if err != nil {
			return err
		}
		if own == nil || own.UID != uint32(uid) {
			return &backend.RefusedError{Reason: fmt.Sprintf("role %s's user %s is of this host's script users (%d-%d), each another cluster's: name a uid outside that range", m.Role, user, first, last)}
		}
	}
	return nil
}

// containerUser is who the member runs as: the role's user, to whom its folder is then
// given, or else the cluster's script user, as on the local backend (none: the image's).
func (d *Backend) containerUser(m backend.MemberRef, want spec.Container, sandbox string) (string, error) {
	if want.User != "" {
		u, g, err := parseUser(want.User)
		if err != nil {
			return "", &backend.RefusedError{Reason: fmt.Sprintf("role %s's user %v", m.Role, err)}
		}
		if err := os.Lchown(sandbox, u, g); err != nil {
			return "", fmt.Errorf("give member %s's folder to user %s: %w", m.Name, want.User, err)
		}
		return want.User, nil
	}
	u, err := d.ScriptUserOf(m.Folder())
	if err != nil || u == nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", u.UID, u.GID), nil
}

// start starts the member's container if it is not running: a member whose container is
// gone has no place to run in.
func (d *Backend) start(ctx context.Context, m backend.MemberRef) error {
	name := containerName(m.Folder(), m.Name)
	got, err := d.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return &backend.NoSandboxError{Member: m.Name, Dir: "container " + name}
	}
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", name, err)
	}
	if got.Container.State != nil && got.Container.State.Running {
		return nil
	}
	if _, err := d.engine.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		return &backend.RefusedError{Reason: fmt.Sprintf("start container %s: %v", name, err)}
	}
	return nil
}

// network makes the cluster's network unless it exists, and returns its name.
func (d *Backend) network(ctx context.Context, c backend.ClusterRef) (string, error) {
	name := networkName(c)
	d.networks.Lock()
	defer d.networks.Unlock()
	if _, err := d.engine.NetworkInspect(ctx, name, client.NetworkInspectOptions{}); err == nil {
		return name, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	if _, err := d.engine.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: d.labels(c)}); err != nil {
		return "", fmt.Errorf("create network %s: %w", name, err)
	}
	return name, nil
}

func (d *Backend) labels(c backend.ClusterRef) map[string]string {
	return map[string]string{LabelCluster: c.Key(), LabelHome: c.Home, LabelNamespace: d.Owner}
}
