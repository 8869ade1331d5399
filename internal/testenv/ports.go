package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// FreeAddress returns a loopback address that is free now and reserved for the caller, for
// a process the test starts later.
//
// Its port comes from below the kernel's ephemeral range (32768 and up): servers that bind
// port 0 meanwhile, such as other tests' embedded servers for their internal services, take
// ports from that range and so cannot take this one before the process binds it. Between
// being found free and being bound, the port is also held against other callers, in this
// test binary or in another running at the same time (go test runs packages in parallel):
// each port handed out keeps an exclusive lock on a file named after it until this process
// exits. Without it, two tests that drew the same port both got it, and one of their
// servers failed to start.
func FreeAddress() (string, error) {
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if !reservePort(port) {
			continue
		}
		address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", address)
		if err != nil {
			continue // taken by something outside the tests; stays reserved, unused
		}
		l.Close()
		return address, nil
	}
	return "", fmt.Errorf("no free port found between 20000 and 32000")
}

var (
	reservedMu sync.Mutex
	// reserved keeps the lock files open: a lock lasts as long as its file stays open.
	reserved []*os.File
)

// reservePort takes the port's lock file, or reports that another caller holds it.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "clusterflow-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	// Locks belong to the open file, so a second open in this same process conflicts too.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reservedMu.Lock()
	reserved = append(reserved, f)
	reservedMu.Unlock()
	return true
}
