package runner

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// watchExit closes exited once cmd's process ends, and reaps it.
//
// Waiting with cmd.Wait blocks an OS thread in wait4 for the script's whole life: an agent
// running 1,000 scripts held 1,000 threads, about 90 KiB of memory each. A pidfd instead
// becomes readable when the process ends, and Go's poller waits on it without a thread;
// the Wait that follows returns at once. Kernels without pidfds (before 5.10) get the
// thread.
func watchExit(cmd *exec.Cmd, exited chan<- struct{}) {
	fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		return
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd")
	go func() {
		defer close(exited)
		if conn, err := pidfd.SyscallConn(); err == nil {
			// Each call asks the pidfd itself whether the process has ended, and waits for
			// the poller only when it has not: the poller forgets a readiness it saw before
			// this wait began, so a script that ended at once would otherwise be waited on
			// for ever (and stay a zombie, its pidfd open, until the agent exits).
			_ = conn.Read(func(fd uintptr) bool {
				ready := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				n, err := unix.Poll(ready, 0)
				return err != nil || n > 0
			})
		}
		_ = pidfd.Close()
		_ = cmd.Wait()
	}()
}
