package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/clusterflow/clusterflow/internal/backend/docker"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// newDockerStack starts a Docker engine of the test's own, its networks in pool, and a
// server with a worker on --backend docker, which gives each cluster a user from uids.
func newDockerStack(t *testing.T, pool, uids string) (*testenv.Docker, *stack) {
	t.Helper()
	engine := testenv.StartDocker(t, pool)
	s := newServerStack(t)
	s.data = scriptUserData(t)
	s.worker = s.start("worker", 1, "Worker starting", dockerWorker(engine, s, uids)...)
	return engine, s
}

// dockerWorker is the command of newDockerStack's worker, with more flags.
func dockerWorker(engine *testenv.Docker, s *stack, uids string, more ...string) []string {
	return append([]string{"worker", "--data", s.data, "--backend", "docker", "--docker-host", engine.Host, "--script-uids", uids}, more...)
}

// webScript serves a page from each member, at the port its role names http.
const webScript = `#!/bin/sh
set -eu
echo "$1 as $(id -u)"
if [ "$1" = --configure ] && [ -n "${CLUSTERFLOW_PORT_HTTP:-}" ]; then
  mkdir -p "$CLUSTERFLOW_MEMBER_DIR/www"
  echo "hello from $CLUSTERFLOW_MEMBER" > "$CLUSTERFLOW_MEMBER_DIR/www/index.html"
  httpd -p "$CLUSTERFLOW_PORT_HTTP" -h "$CLUSTERFLOW_MEMBER_DIR/www"
fi
`

// boxScript is the members' startscript in the container tests: each says where and as
// whom it runs, keeps a first-born mark in its volume, and reaches every member of its
// cluster but those leaving at the address configmeta gives, its name, which the
// engine's DNS resolves on the cluster's network, before it counts as configured.
const boxScript = `#!/bin/sh
set -eu
echo "$1 on $(hostname) as $(id -u) at $CLUSTERFLOW_ADDRESS, tmp $TMPDIR"
case "$1" in
--configure)
  [ -e /data/born ] || echo "$CLUSTERFLOW_MEMBER" > /data/born
  sleep "${SETTLE:-0}"
  [ -z "${HANG:-}" ] || { sleep 600 & echo $! > "$CLUSTERFLOW_MEMBER_DIR/sleep.pid"; wait; }
  for m in $(grep -v '"state":"leaving"' "$CLUSTERFLOW_CONFIGMETA" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p'); do
    i=0
    until addr=$(nslookup "$m" 2> /dev/null | sed -n 's/^Address: *\(10\.213\.[0-9.]*\)$/\1/p') && [ -n "$addr" ]; do
      i=$((i + 1)); [ "$i" -le 50 ] || { echo "cannot resolve $m" >&2; exit 1; }
      sleep 0.2
    done
    echo "reached $m at $addr"
  done ;;
--action)
  echo "born $(cat /data/born)" ;;
esac
`

// Members as containers, through the real CLI and a worker on --backend docker against an
// engine the test starts: each member is a container of its own, from its role's image,
// on a network of its cluster where members reach each other by name; scripts run inside
// as the cluster's script user, and survive the agent's death; a member's volume outlives
// a restart of its container; a container that vanished is a gone member, replaced; a
// cancelled script is stopped inside its container; delete leaves no container, network
// or volume. Each backend refuses by name a role it cannot run.
func TestMembersRunAsContainersOfTheirOwn(t *testing.T) {
	// Serial, before the parallel tests: an engine starting containers takes both cores in
	// bursts, which pushed a parallel Web UI test past its deadline.
	guard(t)
	engine, s := newDockerStack(t, "10.213.64.0/18", "61960-61969")
	engine.ImportImage(t, "clusterflow-test/box:1", nil)
	dir := t.TempDir()
	for file, script := range map[string]string{"box.sh": boxScript, "web.sh": webScript} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec := func(file, spec string) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	boxes := writeSpec("box.yaml", `
name: box
roles:
  - name: db
    members: 3
    startscript: box.sh
    image: clusterflow-test/box:1
    volumes: [/data]
    resources: {cpus: 0.5, memory: 64Mi, pids: 200}
    actions: [born]
    env: {SETTLE: "3"}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	containerOf := func(member string) string {
		return "cf-" + member + "." + s.status("box").Home
	}

	// The deploy, with the agent killed while the configures run: they carry on, and the
	// agent the worker starts again adopts them.
	if res := s.cli("deploy", "-f", boxes); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	waitUpTo(t, time.Minute, "the configures to run", func() bool {
		if st := s.status("box"); st.Phase == workflows.PhaseFailed {
			t.Fatalf("the deploy failed: %s", s.cli("status", "box"))
		}
		for _, m := range []string{"box-db-0", "box-db-1", "box-db-2"} {
			if !strings.Contains(s.cli("logs", "box", m, "--event", "configure").Stdout, "--configure on") {
				return false
			}
		}
		return true
	})
	if pid, ok := testenv.AgentPID(s.data); ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	} else {
		t.Fatal("no agent while the configures run")
	}
	waitUpTo(t, 2*time.Minute, "the deploy to end, its agent killed", func() bool {
		phase := s.status("box").Phase
		return phase == workflows.PhaseReady || phase == workflows.PhaseFailed
	})
	st := s.status("box")
	if st.Phase != workflows.PhaseReady {
		t.Fatalf("after the deploy: %s", s.cli("status", "box"))
	}
	home := st.Home
	for _, m := range []string{"box-db-0", "box-db-1", "box-db-2"} {
		got, err := engine.Client.ContainerInspect(ctx, containerOf(m), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("%s's container: %v", m, err)
		}
		c := got.Container
		if !c.State.Running || c.Config.Hostname != m || !regexp.MustCompile(`^6196\d:6196\d$`).MatchString(c.Config.Labels[docker.LabelUser]) ||
			c.Config.Labels[docker.LabelMember] != m || c.Config.Labels[docker.LabelCluster] != "box@"+home ||
			c.HostConfig.Privileged || string(c.HostConfig.NetworkMode) != "cf-box."+home || c.HostConfig.Memory != 64<<20 || c.HostConfig.NanoCPUs != 5e8 {
			t.Errorf("%s's container: running %v, hostname %q, labels %v, privileged %v, network %q, memory %d, cpus %d",
				m, c.State.Running, c.Config.Hostname, c.Config.Labels, c.HostConfig.Privileged, c.HostConfig.NetworkMode, c.HostConfig.Memory, c.HostConfig.NanoCPUs)
		}
		// What a script is given (the role's env, secrets filled in) goes to its exec, never
		// into the container's configuration.
		for _, kv := range c.Config.Env {
			if strings.HasPrefix(kv, "CLUSTERFLOW_") || strings.HasPrefix(kv, "SETTLE=") {
				t.Errorf("%s's container configuration holds %s", m, kv)
			}
		}
		out := s.cli("logs", "box", m, "--event", "configure")
		if n := strings.Count(out.Stdout, "configure on "); n != 1 {
			t.Errorf("%s's configure ran %d times:\n%s", m, n, out)
		}
		if !regexp.MustCompile(`--configure on ` + m + ` as 6196\d at ` + m + `, tmp /tmp`).MatchString(out.Stdout) {
			t.Errorf("%s's configure did not run in its container as the cluster's user, told its own name:\n%s", m, out)
		}
		for _, peer := range []string{"box-db-0", "box-db-1", "box-db-2"} {
			if !strings.Contains(out.Stdout, "reached "+peer) {
				t.Errorf("%s did not reach %s by name:\n%s", m, peer, out)
			}
		}
	}
	if c, n, v := engine.Leftovers(t, docker.LabelCluster+"=box@"+home); c != 3 || n != 1 || v != 3 {
		t.Errorf("the cluster has %d containers, %d networks and %d volumes; want 3, 1 and 3", c, n, v)
	}

	// A stopped container (a host's reboot) is started by the member's next run, and keeps
	// the member's volume.
	if _, err := engine.Client.ContainerStop(ctx, containerOf("box-db-0"), client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := s.cli("run", "box", "born", "--role", "db", "--wait"); out.Code != 0 || !strings.Contains(out.Stdout, "born box-db-0") || !strings.Contains(out.Stdout, "born box-db-2") {
		t.Errorf("after a stop of box-db-0's container, its volume's mark: %s", out)
	}

	// A container that vanished is a gone member: replaced, its volume removed. A container
	// labelled as the cluster's that it never knew is a rogue: removed.
	if _, err := engine.Client.ContainerRemove(ctx, containerOf("box-db-1"), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rogue := containerOf("box-db-9")
	if _, err := engine.Client.ContainerCreate(ctx, client.ContainerCreateOptions{Name: rogue, Config: &container.Config{
		Image: "clusterflow-test/box:1", Cmd: []string{"sleep", "600"},
		Labels: map[string]string{docker.LabelCluster: "box@" + home, docker.LabelMember: "box-db-9", docker.LabelRole: "db"},
	}}); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("reconcile", "box"); res.Code != 0 {
		t.Fatalf("reconcile: %s", res)
	}
	waitUpTo(t, 2*time.Minute, "the vanished member replaced", func() bool {
		st := s.status("box")
		m := st.Member("box-db-3")
		return st.Phase == workflows.PhaseReady && st.Member("box-db-1") == nil && m != nil && m.State == workflows.MemberReady
	})
	waitUpTo(t, time.Minute, "the vanished member's volume and the rogue removed", func() bool {
		_, _, v := engine.Leftovers(t, docker.LabelMember+"=box-db-1")
		c, _, _ := engine.Leftovers(t, docker.LabelMember+"=box-db-9")
		return v == 0 && c == 0
	})

	// A configure cancelled while it runs is stopped inside its container at once.
	hang := writeSpec("hang.yaml", `
name: hang
roles:
  - {name: db, members: 1, startscript: box.sh, image: "clusterflow-test/box:1", volumes: [/data], env: {HANG: "1"}, timeout: 10m}
`)
	if res := s.cli("deploy", "-f", hang); res.Code != 0 {
		t.Fatalf("deploy hang: %s", res)
	}
	// The container's processes are the host's too: its sleep is found by its member.
	sleeping := func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if string(cmdline) == "sleep\x00600\x00" && slices.Contains(strings.Split(string(environ), "\x00"), "CLUSTERFLOW_MEMBER=hang-db-0") {
				return true
			}
		}
		return false
	}
	waitUpTo(t, time.Minute, "the hanging configure to run", func() bool {
		if st := s.status("hang"); st.Phase == workflows.PhaseFailed {
			t.Fatalf("the hanging deploy failed: %s", s.cli("status", "hang"))
		}
		return sleeping()
	})
	if res := s.cli("cancel", "hang", "--wait"); res.Code != 0 {
		t.Fatalf("cancel: %s", res)
	}
	waitUpTo(t, 30*time.Second, "the cancelled configure's processes to end in its container", func() bool { return !sleeping() })

	// Delete leaves nothing of either cluster.
	for _, name := range []string{"box", "hang"} {
		if res := s.cli("delete", name, "--wait"); res.Code != 0 {
			t.Fatalf("delete %s: %s", name, res)
		}
	}
	if c, n, v := engine.Leftovers(t, docker.LabelCluster); c+n+v != 0 {
		t.Errorf("after the deletes: %d containers, %d networks and %d volumes of clusters left", c, n, v)
	}
	// What the engine alone holds of a cluster the server does not know (its folder gone)
	// is an orphan, found and removed as one; another namespace's is left alone.
	for i, owner := range []string{s.namespaceID(), "another-namespace"} {
		ghost := fmt.Sprintf("ghost%d@0123456789ab", i)
		labels := map[string]string{docker.LabelCluster: ghost, docker.LabelMember: fmt.Sprintf("ghost%d-db-0", i), docker.LabelRole: "db", docker.LabelNamespace: owner}
		if _, err := engine.Client.ContainerCreate(ctx, client.ContainerCreateOptions{Name: fmt.Sprintf("cf-ghost%d-db-0.0123456789ab", i),
			Config: &container.Config{Image: "clusterflow-test/box:1", Cmd: []string{"sleep", "600"}, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Client.VolumeCreate(ctx, client.VolumeCreateOptions{Name: fmt.Sprintf("cf-ghost%d-db-0.0123456789ab-0", i), Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	if res := s.cli("hosts", "--orphans", "--remove"); res.Code != 0 || !strings.Contains(res.Stdout, "ghost0") || strings.Contains(res.Stdout, "ghost1") {
		t.Errorf("orphans of the engine alone: %s", res)
	}
	if c, _, v := engine.Leftovers(t, docker.LabelCluster+"=ghost0@0123456789ab"); c+v != 0 {
		t.Errorf("the engine's orphan left %d containers and %d volumes", c, v)
	}
	if c, _, v := engine.Leftovers(t, docker.LabelCluster+"=ghost1@0123456789ab"); c != 1 || v != 1 {
		t.Errorf("another namespace's cluster on the engine: %d containers and %d volumes left, want 1 and 1", c, v)
	}

	// Each backend refuses, by the role's name, what it cannot run.
	// refused deploys a cluster of one member, which must end in config_error, saying why.
	refused := func(what, file, cluster, member, why string) {
		t.Helper()
		s.cli("deploy", "-f", file, "--wait", "--timeout", "1m")
		st := s.status(cluster)
		if m := st.Member(member); m == nil || m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, why) {
			t.Errorf("%s: %+v", what, m)
		}
	}
	noImage := writeSpec("plain.yaml", "name: plain\nroles:\n  - {name: web, members: 1, startscript: box.sh}\n")
	refused("a role without an image on a docker host", noImage, "plain", "plain-web-0", "role web names no image")
	// A role's own user runs its scripts, and owns the member's folder and volumes.
	owned := writeSpec("owned.yaml", "name: owned\nroles:\n  - {name: web, members: 1, startscript: box.sh, image: \"clusterflow-test/box:1\", user: \"4321:4321\", volumes: [/data], actions: [born]}\n")
	if res := s.cli("deploy", "-f", owned, "--wait", "--timeout", "1m"); res.Code != 0 {
		t.Fatalf("deploy of a role with a user: %s", res)
	}
	if out := s.cli("logs", "owned", "owned-web-0", "--event", "configure"); !strings.Contains(out.Stdout, "--configure on owned-web-0 as 4321 ") {
		t.Errorf("a role with user 4321: %s", out)
	}
	if out := s.cli("run", "owned", "born", "--role", "web", "--wait"); out.Code != 0 || !strings.Contains(out.Stdout, "born owned-web-0") {
		t.Errorf("the volume of a role with a user: %s", out)
	}
	// An image the engine cannot pull (here: a registry on a closed port of loopback) is the
	// member's configure error, with the engine's words; nothing retries it.
	absent := writeSpec("absent.yaml", "name: absent\nroles:\n  - {name: web, members: 1, startscript: box.sh, image: \"127.0.0.1:1/absent:1\"}\n")
	refused("a role whose image cannot be pulled", absent, "absent", "absent-web-0", "pull image 127.0.0.1:1/absent:1")
	// An image pulled from a registry shows how far its pull got in status, while the
	// registry holds its layer back halfway; a port the role publishes is reached on the
	// host's loopback, at the number status gives the member, and nowhere else.
	registry := testenv.ServeImage(t, "clusterflow-test/web", nil)
	web := writeSpec("web.yaml", fmt.Sprintf(`
name: web
roles:
  - {name: www, members: 2, startscript: web.sh, image: %q, heartbeatTimeout: 5s, ports: {http: 8080}, publish: [http]}
`, registry.Ref))
	if res := s.cli("deploy", "-f", web); res.Code != 0 {
		t.Fatalf("deploy web: %s", res)
	}
	pulling := "pulling image " + registry.Ref + ": 0 of 1 layers"
	waitUpTo(t, time.Minute, "the pull's progress in status", func() bool {
		st := s.status("web")
		m := st.Member("web-www-0")
		return m != nil && strings.HasPrefix(m.LastLine, pulling) && strings.Contains(s.cli("status", "web").Stdout, pulling)
	})
	registry.Release()
	waitUpTo(t, time.Minute, "the pulled image's members ready", func() bool {
		st := s.status("web")
		if st.Phase == workflows.PhaseFailed {
			t.Fatalf("the pulled image's deploy failed: %s", s.cli("status", "web"))
		}
		return st.Phase == workflows.PhaseReady
	})
	webStatus := s.status("web")
	for _, m := range webStatus.Roles[0].Members {
		port := m.Ports["http"]
		got, err := engine.Client.ContainerInspect(ctx, "cf-"+m.Name+"."+webStatus.Home, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, bindings := range got.Container.HostConfig.PortBindings {
			for _, b := range bindings {
				if b.HostIP.String() != "127.0.0.1" || b.HostPort != strconv.Itoa(port) {
					t.Errorf("%s publishes its port %d at %s:%s, not on loopback at the same number", m.Name, port, b.HostIP, b.HostPort)
				}
			}
		}
		if len(got.Container.HostConfig.PortBindings) != 1 {
			t.Errorf("%s publishes %v; want its http port alone", m.Name, got.Container.HostConfig.PortBindings)
		}
		page := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
		if page != "hello from "+m.Name+"\n" {
			t.Errorf("%s's published port %d answered %q", m.Name, port, page)
		}
	}

	imaged := writeSpec("imaged.yaml", fmt.Sprintf("name: imaged-%d\nroles:\n  - {name: web, members: 1, startscript: box.sh, image: \"clusterflow-test/box:1\"}\n", os.Getpid()))
	name := fmt.Sprintf("imaged-%d", os.Getpid())
	cli(t, "deploy", "-f", imaged, "--wait", "--timeout", "1m")
	t.Cleanup(func() { cli(t, "delete", name, "--wait") })
	onLocal := statusJSON(t, name)
	if m := onLocal.Member(name + "-web-0"); m == nil || m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, "role web sets image") || !strings.Contains(m.Detail, "local") {
		t.Errorf("a role with an image on a local host: %+v", m)
	}

	// A role asking for privileged containers is refused by name on a host that does not
	// allow them, and runs privileged, retried, once its host does.
	privileged := writeSpec("privileged.yaml", "name: priv\nroles:\n  - {name: dev, members: 1, startscript: web.sh, image: \"clusterflow-test/box:1\", privileged: true}\n")
	refused("a privileged role on a host that does not allow it", privileged, "priv", "priv-dev-0", "role dev asks for privileged containers")
	if c, _, _ := engine.Leftovers(t, docker.LabelMember+"=priv-dev-0"); c != 0 {
		t.Errorf("a refused privileged member has %d containers", c)
	}
	s.worker.Stop()
	s.worker = s.start("worker", 2, "Worker starting", dockerWorker(engine, s, "61960-61969", "--allow-privileged")...)
	// The engine is asked for a privileged container. Whether it can start one is the
	// machine's: where the engine itself lacks a capability (this test's machines have no
	// CAP_SYS_RESOURCE to give), runc refuses, and the member fails with its words.
	retried := s.cli("retry", "priv", "--wait", "--timeout", "1m")
	privStatus := s.status("priv")
	if m := privStatus.Member("priv-dev-0"); m == nil || (m.State != workflows.MemberReady && !strings.Contains(m.Detail, "start container cf-priv-dev-0")) {
		t.Errorf("the privileged role retried on a host that allows it: %s", retried)
	}
	got, err := engine.Client.ContainerInspect(ctx, "cf-priv-dev-0."+privStatus.Home, client.ContainerInspectOptions{})
	if err != nil || !got.Container.HostConfig.Privileged {
		t.Errorf("the privileged role's container on a host that allows it: %v", err)
	}
}
