package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/layout"
)

// Members that share a host share its address, so the host gives each the ports its role
// names, distinct across every cluster and data folder on the machine: a claim file per
// port, in a folder all of them share, names the member holding it, and each member's
// ports are listed in its cluster's folder, so that its removal frees them. A claim whose
// cluster folder is gone (removed by hand, say) is stale and taken over.
//
// A freed port is not given again until the rest of the range has been: the search for a
// free port goes on from where the last one ended (a cursor in the claims folder), as
// Linux hands out pids. A member's peers keep its address for a while after it goes (Redis
// retries its replicas' links, etcd its peers): a port handed straight to another
// cluster's member had a Redis replica sync from a stranger, dropping its data, and never
// take over from its dead master.

// PortRange is the ports a host gives members, Low to High inclusive.
type PortRange struct{ Low, High int }

// DefaultPortRange lies above Linux's default ephemeral range (32768–60999), which
// outgoing connections draw from, so a port given to a member stays free for it.
var DefaultPortRange = PortRange{Low: 61000, High: 63999}

// ParsePortRange reads LOW-HIGH.
func ParsePortRange(s string) (PortRange, error) {
	low, high, ok := strings.Cut(s, "-")
	l, err1 := strconv.Atoi(low)
	h, err2 := strconv.Atoi(high)
	if !ok || err1 != nil || err2 != nil || l < 1 || h > 65535 || l > h {
		return PortRange{}, fmt.Errorf("port range %q is not LOW-HIGH with 1 <= LOW <= HIGH <= 65535", s)
	}
	return PortRange{Low: l, High: h}, nil
}

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Low, r.High) }

// portClaimsDir is shared by every data folder's worker on the machine, when root; others
// claim in a folder of their own user's.
var portClaimsDir = "/var/lib/clusterflow/.port-claims"

func claimsFolder() (string, error) {
	if os.Geteuid() == 0 {
		return portClaimsDir, os.MkdirAll(portClaimsDir, 0o700)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("clusterflow-%d-member-ports", os.Getuid()))
	return dir, atomicfile.PrivateDir(dir)
}

// AssignPorts implements Backend.
func (l *Backend) AssignPorts(_ context.Context, req backend.PortRequest) (backend.PortAssignment, error) {
	clusterDir, err := l.layout.Cluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if err := l.refuseElsewhere(req.Cluster); err != nil {
		return nil, err
	}
	rng := l.Ports
	if rng == (PortRange{}) {
		rng = DefaultPortRange
	}
	out := backend.PortAssignment{}
	err = withPortClaims(func(claims string) error {
		for _, ask := range req.Members {
			if _, err := l.layout.Sandbox(req.Cluster, ask.Member); err != nil {
				return err
			}
			holder := l.portHolder(req.Cluster, ask.Member)
			kept := readPorts(l.portsFile(clusterDir, ask.Member))
			ports := map[string]int{}
			for _, name := range slices.Sorted(slices.Values(ask.Names)) {
				if port, ok := kept[name]; ok && claimHeldBy(claims, port, holder) {
					ports[name] = port // asked again: the same answer
					continue
				}
				port, found := l.nextFreePort(claims, rng)
				if !found {
					return fmt.Errorf("no free port left in %s for %s's %s (see worker --port-range)", rng, ask.Member, name)
				}
				if err := atomicfile.Write(filepath.Join(claims, strconv.Itoa(port)), []byte(holder), 0o600); err != nil {
					return err
				}
				if err := atomicfile.Write(filepath.Join(claims, portCursorFile), []byte(strconv.Itoa(port+1)), 0o600); err != nil {
					return err
				}
				ports[name] = port
			}
			data, err := json.Marshal(ports)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(l.portsFile(clusterDir, ask.Member)), 0o755); err != nil {
				return err
			}
			if err := atomicfile.Write(l.portsFile(clusterDir, ask.Member), data, 0o644); err != nil {
				return fmt.Errorf("keep %s's ports: %w", ask.Member, err)
			}
			out[ask.Member] = ports
		}
		return nil
	})
	return out, err
}

// portCursorFile, in the claims folder, holds the port the next search starts from.
const portCursorFile = ".next"

// nextFreePort is the first free port of rng from the cursor on, wrapping around once.
func (l *Backend) nextFreePort(claims string, rng PortRange) (int, bool) {
	start := rng.Low
	if data, err := readSmall(filepath.Join(claims, portCursorFile), 32); err == nil {
		if cursor, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && cursor >= rng.Low && cursor <= rng.High {
			start = cursor // a cursor outside this worker's range is another's: start low
		}
	}
	size := rng.High - rng.Low + 1
	for i := range size {
		port := rng.Low + (start-rng.Low+i)%size
		if l.claimFree(claims, port) {
			return port, true
		}
	}
	return 0, false
}

// releasePorts frees the member's ports.
func (l *Backend) releasePorts(c layout.Cluster, member string) error {
	clusterDir, err := l.layout.Cluster(c)
	if err != nil {
		return err
	}
	file := l.portsFile(clusterDir, member)
	kept := readPorts(file)
	if len(kept) == 0 {
		return nil
	}
	holder := l.portHolder(c, member)
	if err := withPortClaims(func(claims string) error {
		for _, port := range kept {
			if claimHeldBy(claims, port, holder) {
				if err := os.Remove(filepath.Join(claims, strconv.Itoa(port))); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return os.Remove(file)
}

// releaseClusterPorts frees the ports of every member of the cluster.
func (l *Backend) releaseClusterPorts(c layout.Cluster) error {
	clusterDir, err := l.layout.Cluster(c)
	if err != nil {
		return err
	}
	entries, _ := os.ReadDir(filepath.Join(clusterDir, ".clusterflow", "ports"))
	for _, e := range entries {
		if member, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			if err := l.releasePorts(c, member); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Backend) portsFile(clusterDir, member string) string {
	return filepath.Join(clusterDir, ".clusterflow", "ports", member+".json")
}

// portHolder names a member machine-wide: its data folder, cluster folder and name.
func (l *Backend) portHolder(c layout.Cluster, member string) string {
	return l.root + "\n" + c.Key() + "\n" + member
}

// claimFree says the port is claimed by nobody, or by a member whose cluster folder is
// gone, and that nothing else listens on it now.
func (l *Backend) claimFree(claims string, port int) bool {
	if holder, err := os.ReadFile(filepath.Join(claims, strconv.Itoa(port))); err == nil {
		parts := strings.Split(string(holder), "\n")
		if len(parts) != 3 {
			return false
		}
		if _, err := os.Stat(filepath.Join(parts[0], "clusters", parts[1])); err == nil {
			return false
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func claimHeldBy(claims string, port int, holder string) bool {
	got, err := os.ReadFile(filepath.Join(claims, strconv.Itoa(port)))
	return err == nil && string(got) == holder
}

func readPorts(file string) map[string]int {
	data, err := readSmall(file, 4<<10)
	if err != nil {
		return nil
	}
	var ports map[string]int
	if json.Unmarshal(data, &ports) != nil {
		return nil
	}
	return ports
}

// withPortClaims runs fn under the claims' lock, which every data folder's worker shares.
func withPortClaims(fn func(claims string) error) error {
	dir, err := claimsFolder()
	if err != nil {
		return fmt.Errorf("port claims: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("port claims: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("port claims: %w", err)
	}
	return fn(dir)
}
