package runner

import (
	"os"
	"path/filepath"
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

// openIn opens a script's file for reading, within its sandbox.
func openIn(sandbox, name string) (*os.File, error) {
	root, name, err := rooted(sandbox, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(name)
}

// absolute is a script's file as the script itself names it.
func absolute(sandbox, name string) string {
	if sandbox == "" {
		return name
	}
	return filepath.Join(sandbox, name)
}
