package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Docker is a Docker engine a test starts for itself, from Debian's docker.io: its own
// data, socket and state in a temporary folder, no default bridge, no iptables rules, and
// the networks it makes inside pool (within 10.213.0.0/16). It is stopped, and its folder
// removed, when the test ends; so is every container it ran.
type Docker struct {
	// Host is the engine's address, for --docker-host.
	Host   string
	Client *client.Client
	dir    string
	// pool is where its networks take their subnets (in the host's namespace when it has
	// none of its own), which no interface may hold once it stopped.
	pool string
}

// StartDocker starts the test's engine. Without dockerd the test fails: CI installs it.
func StartDocker(t testing.TB, pool string) *Docker {
	t.Helper()
	return StartDockerIn(t, "", pool)
}

// StartDockerIn starts an engine in a test host's network namespace, where it keeps its
// iptables rules (its published ports, its containers' masquerade): a host of a fleet's.
// Its socket is reached from the test's namespace all the same.
func StartDockerIn(t testing.TB, namespace, pool string) *Docker {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Fatalf("this test needs Docker's engine (dockerd, Debian's docker.io), which .ci/run installs: %v", err)
	}
	// A short folder: the engine's sockets live in it, and a socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "cfdk-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Docker{Host: "unix://" + filepath.Join(dir, "docker.sock"), dir: dir}
	if namespace == "" {
		d.pool = pool
	}
	log, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := []string{"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"), "-H", d.Host, "--bridge", "none",
		"--default-address-pool", "base=" + pool + ",size=24"}
	// In the test's own namespace, the engine leaves the machine's rules alone.
	rules := []string{"--iptables=false", "--ip-masq=false"}
	cmd := exec.Command(dockerd, append(args, rules...)...)
	if namespace != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + namespace, dockerd}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dockerd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { d.stop(t, cmd, exited) })
	if d.Client, err = client.New(client.WithHost(d.Host), client.WithAPIVersionNegotiation()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := d.Client.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			return d
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("dockerd exited at its start:\n%s", out[max(0, len(out)-4000):])
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not answer within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop removes every container the engine runs and every network it made, stops it and
// removes its folder.
func (d *Docker) stop(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if list, err := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true}); err == nil {
		for _, c := range list.Items {
			_, _ = d.Client.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	// A network's bridge outlives the engine, holding its subnet, unless the network is
	// removed: left behind, they exhaust the pools of the engines started after.
	if list, err := d.Client.NetworkList(ctx, client.NetworkListOptions{}); err == nil {
		for _, n := range list.Items {
			if n.Name == "host" || n.Name == "none" || n.Name == "bridge" {
				continue
			}
			if _, err := d.Client.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
				t.Errorf("remove the engine's network %s: %v", n.Name, err)
			}
		}
	}
	_ = d.Client.Close()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	// containerd, which dockerd started, goes with it; kill what of its group remains.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	unmountUnder(d.dir)
	if err := os.RemoveAll(d.dir); err != nil {
		t.Errorf("remove the engine's folder: %v", err)
	}
	if held := interfacesIn(d.pool); len(held) > 0 {
		t.Errorf("the engine left interfaces holding addresses of its pool %s: %v", d.pool, held)
	}
}

// interfacesIn names the interfaces of this namespace with an address inside pool ("":
// none looked for).
func interfacesIn(pool string) []string {
	_, cidr, err := net.ParseCIDR(pool)
	if err != nil {
		return nil
	}
	ifaces, _ := net.Interfaces()
	var held []string
	for _, iface := range ifaces {
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && cidr.Contains(ip.IP) {
				held = append(held, iface.Name)
				break
			}
		}
	}
	return held
}

// unmountUnder unmounts whatever the engine left mounted in dir, deepest first.
func unmountUnder(dir string) {
	mounts, _ := os.ReadFile("/proc/self/mounts")
	var under []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			under = append(under, f[1])
		}
	}
	slices.SortFunc(under, func(a, b string) int { return len(b) - len(a) })
	for _, m := range under {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// ImportImage makes an image named tag from files of this machine (path in the image →
// path here), with each program's shared libraries, and busybox's applets as commands
// on /bin. Nothing is pulled: the engine has no registry here.
func (d *Docker) ImportImage(t testing.TB, tag string, programs map[string]string) {
	t.Helper()
	image := rootfs(t, programs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Client.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(image), SourceName: "-"}, tag, client.ImageImportOptions{Changes: []string{"ENV PATH=" + imagePath}})
	if err != nil {
		t.Fatalf("import image %s: %v", tag, err)
	}
	defer res.Close()
	if _, err := io.Copy(io.Discard, res); err != nil {
		t.Fatalf("import image %s: %v", tag, err)
	}
}

// imagePath is the test images' PATH.
const imagePath = "/usr/local/bin:/usr/bin:/bin"

// rootfs is an image's file system as a tar: programs (path in the image → path here)
// with their shared libraries, busybox's applets on /bin, and extra files by content.
func rootfs(t testing.TB, programs map[string]string, extra map[string][]byte) []byte {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("building a test image needs busybox (Debian's busybox-static), which .ci/run installs: %v", err)
	}
	files := map[string]string{}
	for in, here := range withBusybox(programs, busybox) {
		files[in] = here
		libs, err := sharedLibraries(here)
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range libs {
			files[lib] = lib
		}
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	var image bytes.Buffer
	w := tar.NewWriter(&image)
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) {
		for ; dir != "/" && dir != "." && !dirs[dir]; dir = filepath.Dir(dir) {
			dirs[dir] = true
			_ = w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: mode})
		}
	}
	addFile := func(in string, mode int64, data []byte) {
		addDir(filepath.Dir("/"+in), 0o755)
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(in, "/"), Mode: mode, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(data)
	}
	addDir("/tmp", 0o1777)
	addFile("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	addFile("etc/group", 0o644, []byte("root:x:0:\n"))
	for _, in := range slices.Sorted(maps.Keys(extra)) {
		addFile(in, 0o644, extra[in])
	}
	for _, in := range slices.Sorted(maps.Keys(files)) {
		data, err := os.ReadFile(files[in])
		if err != nil {
			t.Fatal(err)
		}
		addFile(in, 0o755, data)
	}
	for _, applet := range strings.Fields(string(applets)) {
		if _, taken := files["/bin/"+applet]; !taken && applet != "busybox" {
			_ = w.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777})
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return image.Bytes()
}

// withBusybox is programs and busybox, which may be Debian's dynamic one.
func withBusybox(programs map[string]string, busybox string) map[string]string {
	all := maps.Clone(programs)
	if all == nil {
		all = map[string]string{}
	}
	all["/bin/busybox"] = busybox
	return all
}

// sharedLibraries lists the libraries a program loads (its interpreter included), by ldd.
func sharedLibraries(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", program, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs, nil
}

// Leftovers counts the containers, networks and volumes carrying the label (KEY or
// KEY=VALUE).
func (d *Docker) Leftovers(t testing.TB, label string) (containers, networks, volumes int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", label)
	c, err1 := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	n, err2 := d.Client.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	v, err3 := d.Client.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			t.Fatalf("list the engine's leftovers: %v", err)
		}
	}
	return len(c.Items), len(n.Items), len(v.Items)
}

// Exec runs a command in a container, as its user, and returns its output (stdout and
// stderr together) and an error if it could not run or exited non-zero.
func (d *Docker) Exec(container string, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := d.Client.ExecCreate(ctx, container, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	attached, err := d.Client.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer attached.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, attached.Reader); err != nil {
		return out.String(), err
	}
	for {
		got, err := d.Client.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return out.String(), err
		}
		if !got.Running {
			if got.ExitCode != 0 {
				return out.String(), fmt.Errorf("%v exited %d", cmd, got.ExitCode)
			}
			return out.String(), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
