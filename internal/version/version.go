// Package version says which release of clusterflow this binary is, and from which commit
// it was built. The release history, with each release's upgrade notes, is
// docs/releases.md; a release is cut by setting Release to it there and here together.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Release is the last release this code is, or builds on: a build from a later commit says
// so in its commit.
const Release = "0.1.0"

// commit is set by the linker: `make build` passes
// -X github.com/clusterflow/clusterflow/internal/version.commit=HASH, as the go command's
// own VCS stamp is missing wherever GOFLAGS holds -buildvcs=false.
var commit string

// Info is what `clusterflow version -o json` prints.
type Info struct {
	Release string `json:"release"`
	// Commit is the commit the binary was built from, with "-dirty" when the checkout had
	// changes; empty when the build was given neither (go build -buildvcs=false, no -X).
	Commit string `json:"commit,omitempty"`
	Go     string `json:"go"`
}

// Get reads this binary's version: its commit as `make build` told the linker, else as the
// go command stamped it.
func Get() Info {
	info := Info{Release: Release, Commit: commit, Go: runtime.Version()}
	build, ok := debug.ReadBuildInfo()
	if info.Commit != "" || !ok {
		return info
	}
	stamp := map[string]string{}
	for _, s := range build.Settings {
		stamp[s.Key] = s.Value
	}
	if revision := stamp["vcs.revision"]; revision != "" {
		info.Commit = revision
		if stamp["vcs.modified"] == "true" {
			info.Commit += "-dirty"
		}
	}
	return info
}

// String is the version in one line: "0.1.0 (commit 1a2b3c4d5e6f)", or "0.1.0" alone.
func (i Info) String() string {
	if i.Commit == "" {
		return i.Release
	}
	return i.Release + " (commit " + Short(i.Commit) + ")"
}

// Short cuts a commit to its first 12 hex digits, keeping a "-dirty" mark.
func Short(commit string) string {
	hash, dirty := strings.CutSuffix(commit, "-dirty")
	if dirty {
		return hash[:min(12, len(hash))] + "-dirty"
	}
	return hash[:min(12, len(hash))]
}
