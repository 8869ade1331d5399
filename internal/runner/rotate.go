package runner

import (
	"fmt"
	"io"
	"os"
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
func RotateLog(path string, limit int64) (bool, error) {
	info, err := os.Stat(path)
	if err != nil || info.Size() <= limit {
		return false, nil
	}
	src, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer src.Close()
	tmp := path + ".1.tmp"
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return false, fmt.Errorf("rotate %s: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path+".1"); err != nil {
		return false, err
	}
	return true, os.Truncate(path, 0)
}
