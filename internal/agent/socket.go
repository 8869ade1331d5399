package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// The agent's socket, where it takes its workers' requests, and its folder's lock.

// SocketPath is the agent's socket: in its own folder, its user's alone (0700).
func SocketPath(dir string) string { return filepath.Join(dir, "agent.sock") }

// maxSocketPath leaves room under Linux's 108-byte limit, terminator included.
const maxSocketPath = 100

// socketAddress is the name to bind or dial the socket by. A Unix socket's path is
// limited to about 107 bytes, which a deep --data folder passes: then its folder is opened
// and reached through /proc/self/fd, a short name for the same place, rather than through
// a shared folder such as /tmp that another local user could take first. done closes the
// folder once the socket is bound or dialled.
func socketAddress(sock string) (addr string, done func(), err error) {
	if len(sock) <= maxSocketPath {
		return sock, func() {}, nil
	}
	f, err := os.OpenFile(filepath.Dir(sock), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", f.Fd(), filepath.Base(sock)), func() { f.Close() }, nil
}

// listen makes the agent's socket: mode 0600, or 0660 and of group when the workers that
// call it are another user's.
func listen(sock string, group int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return nil, err
	}
	addr, done, err := socketAddress(sock)
	if err != nil {
		return nil, err
	}
	defer done()
	_ = os.Remove(addr) // left by an agent that died; the lock says none is running now
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		// The name may be a /proc one, gone with done: Serve removes the socket file by its
		// real name instead.
		ul.SetUnlinkOnClose(false)
	}
	mode := os.FileMode(0o600)
	if group > 0 {
		mode = 0o660
		err = os.Lchown(addr, -1, group)
	}
	if err == nil {
		err = os.Chmod(addr, mode)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// peerUID is the user ID of the process at the other end of a Unix socket connection.
func peerUID(conn net.Conn) (int, bool) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return -1, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return -1, false
	}
	return int(cred.Uid), true
}

// lock takes the folder's lock file so that one agent serves it.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrAlreadyRunning
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}
