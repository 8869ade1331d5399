package runner

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxLogBytes caps one event's stdout or stderr file of a member. Past it the file is
// rotated once: its content moves to FILE.1 (replacing the older one) and FILE starts
// empty, so a member's output takes at most about twice this per stream and event.
const MaxLogBytes = 64 << 20

// RotateLog rotates path when it holds more than limit bytes, and says whether it did.
// Scripts write their output with O_APPEND, straight to the file, so it cannot be renamed
// from under them: as logrotate's copytruncate does, the content is copied to path.1 and
// path truncated, and the script's next write lands at the start of the emptied file.
// What it writes between the copy and the truncation is lost.
//
// The file is a script's, named within its sandbox (see rooted), and the copy is made there.
func RotateLog(sandbox, name string, limit int64) (bool, error) {
	root, name, err := rooted(sandbox, name)
	if err != nil {
		return false, nil // no sandbox, no log
	}
	defer root.Close()
	src, err := OpenScriptFile(root, name, os.O_RDWR, 0)
	if err != nil {
		return false, nil // none, or not a plain file: openLog replaces it
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil || info.Size() <= limit {
		return false, nil
	}
	tmp := name + ".1.tmp"
	_ = root.Remove(tmp)
	dst, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return false, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		_ = dst.Chown(int(st.Uid), int(st.Gid)) // the rotated output stays the script user's
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return false, fmt.Errorf("rotate %s: %w", name, err)
	}
	if err := dst.Close(); err != nil {
		return false, err
	}
	if err := root.Rename(tmp, name+".1"); err != nil {
		return false, err
	}
	return true, src.Truncate(0)
}
