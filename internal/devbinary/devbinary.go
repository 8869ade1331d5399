// Package devbinary finds the binary that embeds the Temporal server and Web UI
// (cmd/clusterflow-dev), for `clusterflow dev` to run in its place. Linking the server
// into every command cost each one about 70 ms of package initialisation and 100 MB of
// memory; only `dev` needs it.
package devbinary

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Name is the binary's file name, and Env the variable that names it outright.
const (
	Name = "clusterflow-dev"
	Env  = "CLUSTERFLOW_DEV_BINARY"
)

// Finder finds the binary: the one Env names, else clusterflow-dev beside this executable,
// else, when SourceDir is this binary's checkout and Go is installed, the one built from it
// into the user's cache (the README's `go run ./cmd/clusterflow dev`), else on PATH.
type Finder struct {
	// SourceDir is the module the running binary was built from, or "" when unknown (a
	// -trimpath build).
	SourceDir string
}

// Find returns the binary's path, building it first if that is the way.
func (f Finder) Find() (string, error) {
	if path := os.Getenv(Env); path != "" {
		if err := executable(path); err != nil {
			return "", fmt.Errorf("%s=%s: %w", Env, path, err)
		}
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), Name)
		if executable(beside) == nil {
			return beside, nil
		}
	}
	if f.fromCheckout() {
		return f.build()
	}
	if path, err := exec.LookPath(Name); err == nil {
		return path, nil
	}
	return "", notFound()
}

// fromCheckout says the binary can be built from the checkout this one was built from:
// it is still there, and Go is installed. That one matches this binary's version, which a
// clusterflow-dev on PATH may not.
func (f Finder) fromCheckout() bool {
	if f.SourceDir == "" {
		return false
	}
	if _, err := os.Stat(filepath.Join(f.SourceDir, "cmd", Name, "main.go")); err != nil {
		return false
	}
	_, err := exec.LookPath("go")
	return err == nil
}

func notFound() error {
	return fmt.Errorf("`dev` runs the embedded Temporal server from %s, which is neither beside this binary nor on PATH: build it with `go build ./cmd/clusterflow ./cmd/clusterflow-dev` (both in one folder), or name it with %s", Name, Env)
}

func executable(path string) error {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case info.IsDir() || info.Mode()&0o111 == 0:
		return fmt.Errorf("not an executable file")
	}
	return nil
}

// build builds cmd/clusterflow-dev from the source folder into the user's cache, a folder
// per checkout. Go relinks only when the source changed, so a later dev starts at once.
// A lock keeps two devs started together from building over each other.
func (f Finder) build() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", Name, err)
	}
	dir := filepath.Join(cache, "clusterflow", "dev-"+checkoutKey(f.SourceDir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("build %s: %w", Name, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", Name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build %s: %w", Name, err)
	}
	out := filepath.Join(dir, Name)
	if _, err := os.Stat(out); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "Building the embedded Temporal server (./cmd/%s) into %s; the first build takes several minutes.\n", Name, dir)
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+Name)
	cmd.Dir, cmd.Stdout, cmd.Stderr = f.SourceDir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s in %s: %w", Name, f.SourceDir, err)
	}
	return out, nil
}

// checkoutKey names a checkout's cache folder: checkouts of different versions side by
// side must not take turns relinking one binary.
func checkoutKey(dir string) string {
	h := fnv.New32a() // a short name, not a secret
	h.Write([]byte(dir))
	return fmt.Sprintf("%08x", h.Sum32())
}

// Exec runs the binary in this process's place with args (the command line after the
// binary's name): same PID, so signals and pid files reach the server as before.
func Exec(path string, args []string) error {
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	return fmt.Errorf("run %s: %w", path, err)
}
