package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Load reads a spec file and the startscripts it names; relative script paths are taken
// from the spec file's folder.
func Load(file string) (Cluster, error) {
	data, err := readLimited(file, MaxSpecFileSize)
	if err != nil {
		return Cluster{}, invalid(file, []Problem{{Path: "spec", Message: describeReadError(err)}})
	}
	return Parse(data, file, fileScriptReader(filepath.Dir(file)))
}

// fileScriptReader reads startscripts from disk, resolving relative paths against dir.
func fileScriptReader(dir string) ScriptReader {
	return func(path string) ([]byte, error) {
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		content, err := readLimited(path, MaxScriptSize)
		if errors.Is(err, errTooLarge) {
			return nil, ErrScriptTooLarge
		}
		return content, err
	}
}

var errTooLarge = errors.New("too large")

// readLimited reads a file of at most limit bytes, refusing a larger one without reading it
// all.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("is a folder, not a file")
	}
	content, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(content)) > limit {
		return nil, fmt.Errorf("is larger than the %d KiB limit: %w", limit>>10, errTooLarge)
	}
	return content, nil
}

func describeReadError(err error) string {
	if os.IsNotExist(err) {
		return "no such file"
	}
	return err.Error()
}
