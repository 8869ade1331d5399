// Package keyfile reads the files that hold keys (codec keys, signing keys): regular files
// of bounded size that only their owner may read, as ssh does for private keys.
package keyfile

import (
	"fmt"
	"os"
)

// ReadPrivate reads a key file that must be its owner's alone; what names it in errors.
func ReadPrivate(path, what string, limit int64) ([]byte, error) {
	return read(path, what, limit, true)
}

// ReadPublic reads a file of public keys, which anyone may read (but not write, which
// the folder's permissions decide).
func ReadPublic(path, what string, limit int64) ([]byte, error) {
	return read(path, what, limit, false)
}

func read(path, what string, limit int64, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file", what, path)
	}
	if perm := info.Mode().Perm(); private && perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s: mode %04o lets others read the key; chmod 600 it", what, path, perm)
	}
	if perm := info.Mode().Perm(); !private && perm&0o022 != 0 {
		return nil, fmt.Errorf("%s %s: mode %04o lets others change which keys are trusted; chmod 644 it", what, path, perm)
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s %s: %d bytes, more than such a file holds (%d at most)", what, path, info.Size(), limit)
	}
	data := make([]byte, info.Size())
	if _, err := f.ReadAt(data, 0); err != nil && info.Size() > 0 {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return data, nil
}
