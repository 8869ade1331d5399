package runner

import (
	"bytes"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// NoNewPrivileges makes sure that this process, and so every script it starts, can gain no
// privilege by exec: a set-user-ID program or one with file capabilities runs with no more
// than its caller's (the kernel's no_new_privs, which a unit's NoNewPrivileges=yes sets
// too). Where it is not set yet, it sets it on this thread and execs this program again in
// place, with the same arguments and environment: the new image has it whole, whatever
// threads this one had.
func NoNewPrivileges() error {
	if noNewPrivs() {
		return nil
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return syscall.Exec("/proc/self/exe", os.Args, os.Environ())
}

// noNewPrivs says whether this process has no_new_privs.
func noNewPrivs() bool {
	status, err := os.ReadFile("/proc/self/status")
	return err == nil && bytes.Contains(status, []byte("\nNoNewPrivs:\t1\n"))
}
