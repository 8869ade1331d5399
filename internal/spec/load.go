package spec

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Load reads a spec file and the startscripts it names; relative script paths are taken
// from the spec file's folder.
func Load(file string) (Cluster, error) {
	data, err := os.ReadFile(file)
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
		// Read one byte past the limit so an oversized file is refused without reading it all.
		content, err := io.ReadAll(io.LimitReader(f, MaxScriptSize+1))
		if err != nil {
			return nil, err
		}
		if len(content) > MaxScriptSize {
			return nil, ErrScriptTooLarge
		}
		return content, nil
	}
}

func describeReadError(err error) string {
	if os.IsNotExist(err) {
		return "no such file"
	}
	return err.Error()
}
