// Command clusterflow deploys, watches and deletes multi-role clusters as Temporal workflows.
// It carries every command; `dev` runs cmd/clusterflow-dev in its place, which links the
// embedded Temporal server and Web UI that no other command needs (internal/devbinary).
// cmd/clusterflow-host is the same without `dev`, for the hosts of a fleet.
package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/clusterflow/clusterflow/internal/cli"
	"github.com/clusterflow/clusterflow/internal/devbinary"
)

func main() {
	os.Exit(cli.Main(&cli.Embedded{Elsewhere: devbinary.Finder{SourceDir: sourceDir()}.Find}))
}

// sourceDir is the checkout this binary was built from (as `go run ./cmd/clusterflow`
// builds it), for building cmd/clusterflow-dev from the same source; "" when the build
// kept no paths (-trimpath).
func sourceDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}
