package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// A script's files (its output, its exit status) live in its sandbox, which its user owns
// and may fill with links to anywhere, while whoever reads, rotates and opens those files
// for it is root. So every one of them is reached through an os.Root of the sandbox, and
// no link, planted before a run or during it, leads out of it.

// rooted opens the folder a script's file is reached through and returns its name there:
// the run's sandbox, or, for a handle recorded before sandboxes were named, the file's own
// folder.
func rooted(sandbox, name string) (*os.Root, string, error) {
	dir := sandbox
	if dir == "" {
		dir, name = filepath.Dir(name), filepath.Base(name)
	}
	root, err := os.OpenRoot(dir)
	return root, name, err
}

// ErrNotScriptFile is what OpenScriptFile says of anything but a plain file at a name.
var ErrNotScriptFile = errors.New("not a plain file")

// OpenScriptFile opens a file within a sandbox whose user may have put anything at its
// name: a FIFO or a device, on which an open or a read would block for as long as the
// script likes, or a hard link to a file outside (/etc/shadow, on a host that allows
// such links), which a link check by name cannot see and which the caller, root, would
// then read, write or give away. It never blocks on the open, and returns only a regular
// file with one link, owned by the sandbox's user or by the caller (which made it, not yet
// given away); anything else is closed and refused with ErrNotScriptFile. A symbolic link
// is followed only within the sandbox (os.Root).
func OpenScriptFile(root *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	sandbox, err := root.Stat(".")
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	owner, _ := sandbox.Sys().(*syscall.Stat_t)
	switch {
	case !info.Mode().IsRegular() || !ok || st.Nlink != 1:
		f.Close()
		links := uint64(0)
		if ok {
			links = uint64(st.Nlink)
		}
		return nil, fmt.Errorf("%s (%s, %d links): %w", name, info.Mode().Type(), links, ErrNotScriptFile)
	case owner == nil || (st.Uid != owner.Uid && int(st.Uid) != os.Geteuid()):
		f.Close()
		return nil, fmt.Errorf("%s (owned by uid %d, not the sandbox's user): %w", name, st.Uid, ErrNotScriptFile)
	}
	return f, nil
}

// openIn opens a script's file for reading, within its sandbox (see OpenScriptFile).
func openIn(sandbox, name string) (*os.File, error) {
	root, name, err := rooted(sandbox, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return OpenScriptFile(root, name, os.O_RDONLY, 0)
}

// absolute is a script's file as the script itself names it.
func absolute(sandbox, name string) string {
	if sandbox == "" {
		return name
	}
	return filepath.Join(sandbox, name)
}
