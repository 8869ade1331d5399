package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// PrivateDir makes dir (mode 0700) or checks that it is the user's own: a folder, not a
// link, owned by this user and mode 0700. A socket or lock in a folder another local user
// controls could be swapped for theirs.
func PrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to another user", dir)
	case fi.Mode().Perm() != 0o700:
		return fmt.Errorf("%s has mode %04o; it must be 0700", dir, fi.Mode().Perm())
	}
	return nil
}
