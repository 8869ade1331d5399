package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What a user leaves in the kernel past its processes: System V shared memory, semaphores
// and message queues, and POSIX message queues. A cluster's user that goes with its cluster
// leaves none of them to the next cluster given its number.

// sysvIPC are the System V objects, by their /proc listing, the column of their ID, and
// the call that removes one.
var sysvIPC = []struct {
	list, idColumn string
	remove         func(id int) error
}{
	{"/proc/sysvipc/shm", "shmid", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
	{"/proc/sysvipc/sem", "semid", func(id int) error {
		_, _, errno := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, uintptr(unix.IPC_RMID), 0, 0, 0)
		return errnoErr(errno)
	}},
	{"/proc/sysvipc/msg", "msqid", func(id int) error {
		_, _, errno := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), uintptr(unix.IPC_RMID), 0)
		return errnoErr(errno)
	}},
}

// posixQueues is where POSIX message queues are, when mounted.
var posixQueues = "/dev/mqueue"

func errnoErr(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// IPCOf lists what uid owns of the kernel's IPC objects, as "shm 42" or a queue's path.
func IPCOf(uid uint32) []string {
	var held []string
	for _, kind := range sysvIPC {
		for _, id := range sysvOwnedBy(kind.list, kind.idColumn, uid) {
			held = append(held, fmt.Sprintf("%s %d", filepath.Base(kind.list), id))
		}
	}
	entries, _ := os.ReadDir(posixQueues)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
				held = append(held, filepath.Join(posixQueues, e.Name()))
			}
		}
	}
	return held
}

// RemoveIPCOf removes every IPC object uid owns.
func RemoveIPCOf(uid uint32) error {
	var errs []error
	for _, kind := range sysvIPC {
		for _, id := range sysvOwnedBy(kind.list, kind.idColumn, uid) {
			if err := kind.remove(id); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EIDRM) {
				errs = append(errs, fmt.Errorf("remove %s %d of user %d: %w", filepath.Base(kind.list), id, uid, err))
			}
		}
	}
	entries, _ := os.ReadDir(posixQueues)
	for _, e := range entries {
		info, err := e.Info()
		if st, ok := info.Sys().(*syscall.Stat_t); err == nil && ok && st.Uid == uid {
			if err := os.Remove(filepath.Join(posixQueues, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sysvOwnedBy reads a /proc/sysvipc listing: the IDs of the objects uid owns.
func sysvOwnedBy(list, idColumn string, uid uint32) []int {
	data, err := os.ReadFile(list)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 2 {
		return nil
	}
	header := strings.Fields(lines[0])
	idAt, uidAt := slices.Index(header, idColumn), slices.Index(header, "uid")
	if idAt < 0 || uidAt < 0 {
		return nil
	}
	var ids []int
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) <= max(idAt, uidAt) || f[uidAt] != strconv.FormatUint(uint64(uid), 10) {
			continue
		}
		if id, err := strconv.Atoi(f[idAt]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
