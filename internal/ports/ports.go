// Package ports hands out TCP ports that stay free until the caller's server binds them.
//
// A port found free by binding port 0 and closing is free only for a moment: another
// process's outgoing connection or server can take it before the caller binds it, and the
// embedded Temporal server exits the whole process when a bind fails. So ports come from
// below the kernel's ephemeral range, which port 0 and outgoing connections draw from, and
// each port handed out keeps an exclusive lock on a file named after it, shared by every
// process of the same user on the machine, until this process exits. (Another user's
// processes bind-check instead: a port they hold is found taken.)
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
)

// The range stays below Linux's default ephemeral range (32768–60999).
const (
	lowest  = 20000
	highest = 32000
)

var (
	mu sync.Mutex
	// held keeps the lock files open: a lock lasts as long as its file stays open.
	held []*os.File
)

// Reserve returns a port that is free on host now and held against every other caller.
func Reserve(host string) (int, error) {
	for range 100 {
		port := lowest + rand.IntN(highest-lowest)
		if !lock(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // taken by something that does not use these locks; stays held, unused
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d", host, lowest, highest)
}

// lock takes the port's lock file, or reports that another caller holds it.
func lock(port int) bool { return Claim("ports", port) }

// Claim takes number n of a space (ports, test networks …) for this process, until it
// exits, or reports that another process or caller holds it.
func Claim(space string, n int) bool {
	port := n
	dir, ok := claimsDir(space)
	if !ok {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return false
	}
	// Locks belong to the open file, so a second open in this same process conflicts too.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	mu.Lock()
	held = append(held, f)
	mu.Unlock()
	return true
}

// claimsDir is the user's own folder of claims in the shared temporary folder, or none
// (atomicfile.PrivateDir): another local user could otherwise plant links in it, or hold
// every claim.
func claimsDir(space string) (string, bool) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("clusterflow-%d-%s", os.Getuid(), space))
	return dir, atomicfile.PrivateDir(dir) == nil
}
