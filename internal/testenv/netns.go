package testenv

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/ports"
	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// Network is a test network of hosts on this machine: a bridge in the root network
// namespace with address 10.231.N.1, and for each host a network namespace joined to the
// bridge by a veth pair, with address 10.231.N.(i+1). Processes started in a host's
// namespace reach the bridge's address and nothing else; cutting a host's link is a real
// partition. It needs root and iproute2 (.ci/run installs it).
type Network struct {
	t      testing.TB
	n      int
	Bridge string
	// Address is the bridge's address: servers that hosts must reach listen on it.
	Address string
}

// NewNetwork makes a test network, removed when the test ends (or a guard aborts it).
func NewNetwork(t testing.TB) *Network {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("test hosts need iproute2's ip command (apt-get install iproute2; .ci/run does)")
	}
	n := 0
	for i := 1; i < 250 && n == 0; i++ {
		if ports.Claim("netns", i) {
			n = i
		}
	}
	if n == 0 {
		t.Fatal("no free test network number")
	}
	net := &Network{t: t, n: n, Bridge: fmt.Sprintf("cfbr%d", n), Address: fmt.Sprintf("10.231.%d.1", n)}
	net.removeAll() // left by a test binary that was killed
	unregister := testlimit.OnAbort(net.removeAll)
	t.Cleanup(func() {
		net.removeAll()
		unregister()
	})
	// A bridge takes the lowest MAC address of its ports unless given one, so each host
	// added would change it under the hosts that already resolved it.
	net.ip("link", "add", net.Bridge, "address", fmt.Sprintf("02:cf:00:00:00:%02x", n), "type", "bridge")
	net.ip("addr", "add", net.Address+"/24", "dev", net.Bridge)
	net.ip("link", "set", net.Bridge, "up")
	return net
}

// Host is one host of a test network.
type Host struct {
	// Namespace is the host's network namespace; Address its address in it.
	Namespace, Address string
	link               string
	net                *Network
}

// AddHost adds host i (1 to 200) to the network.
func (net *Network) AddHost(i int) *Host {
	h := &Host{
		Namespace: fmt.Sprintf("cf-%d-%d", net.n, i), Address: fmt.Sprintf("10.231.%d.%d", net.n, i+1),
		link: fmt.Sprintf("cf%dh%d", net.n, i), net: net,
	}
	peer := fmt.Sprintf("cf%dn%d", net.n, i)
	net.ip("netns", "add", h.Namespace)
	net.ip("link", "add", h.link, "type", "veth", "peer", "name", peer)
	net.ip("link", "set", h.link, "master", net.Bridge)
	net.ip("link", "set", h.link, "up")
	net.ip("link", "set", peer, "netns", h.Namespace)
	net.ip("-n", h.Namespace, "addr", "add", h.Address+"/24", "dev", peer)
	net.ip("-n", h.Namespace, "link", "set", peer, "up")
	net.ip("-n", h.Namespace, "link", "set", "lo", "up")
	return h
}

// Cut takes the host off the network; Restore puts it back.
func (h *Host) Cut()     { h.net.ip("link", "set", h.link, "down") }
func (h *Host) Restore() { h.net.ip("link", "set", h.link, "up") }

func (net *Network) ip(args ...string) {
	net.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		net.t.Fatalf("ip %s: %v: %s (test hosts need root)", strings.Join(args, " "), err, out)
	}
}

// removeAll deletes the network's bridge, links and namespaces, whatever exists of them.
func (net *Network) removeAll() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	prefix := "cf-" + strconv.Itoa(net.n) + "-"
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, prefix) {
			_ = exec.Command("ip", "netns", "del", name).Run() // its veth ends go with it
		}
	}
	_ = exec.Command("ip", "link", "del", net.Bridge).Run()
}
