package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// realApp is an example under examples/ made ready for a test of the real app it runs: its
// spec under another cluster name, and its script behind a wrapper that fails a configure
// while the file fail exists (a cause to fix, for the retry).
type realApp struct {
	t        *testing.T
	name     string
	specPath string
	fail     string
	pidFile  string // the daemon's pid file in a member's folder
	pids     []int  // every daemon the cluster ran, to check none outlives it
}

// newRealApp sets up examples/EXAMPLE (its cluster.yaml and SCRIPT) as cluster name; the
// wrapper fails the configures of failRole (any role if empty). It fails the test when one
// of tools is missing, and kills every daemon it noted at the end.
func newRealApp(t *testing.T, example, script, name, failRole, pidFile string, tools ...string) *realApp {
	t.Helper()
	for _, bin := range tools {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is needed by examples/%s (.ci/run installs it): %v", bin, example, err)
		}
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a := &realApp{t: t, name: name, specPath: filepath.Join(dir, "cluster.yaml"), fail: filepath.Join(dir, "FAIL"), pidFile: pidFile}
	cond := fmt.Sprintf(`[ "$1" = --configure ] && [ -e %q ]`, a.fail)
	if failRole != "" {
		cond += fmt.Sprintf(` && [ "$CLUSTERFLOW_ROLE" = %q ]`, failRole)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nif %s; then echo 'injected failure' >&2; exit 1; fi\nexec %q \"$@\"\n",
		cond, filepath.Join(root, "examples", example, script))
	if err := os.WriteFile(filepath.Join(dir, script), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile(filepath.Join(root, "examples", example, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.Replace(string(spec), "name: "+example+"\n", "name: "+name+"\n", 1)
	if err := os.WriteFile(a.specPath, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range a.pids {
			_ = syscallKill(pid)
		}
	})
	return a
}

// folder is the cluster's folder, once deployed.
func (a *realApp) folder() string { return clusterDir(dataDir, a.name) }

// failConfigures makes the wrapper fail configures (true) or run them again (false).
func (a *realApp) failConfigures(fail bool) {
	a.t.Helper()
	var err error
	if fail {
		err = os.WriteFile(a.fail, nil, 0o644)
	} else {
		err = os.Remove(a.fail)
	}
	if err != nil {
		a.t.Fatal(err)
	}
}

// pidOf is the pid the member's pid file holds.
func (a *realApp) pidOf(member string) int {
	a.t.Helper()
	data, err := os.ReadFile(filepath.Join(a.folder(), member, a.pidFile))
	if err != nil {
		a.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		a.t.Fatalf("%s's %s: %v", member, a.pidFile, err)
	}
	return pid
}

// notePIDs notes the daemons the members' pid files name now.
func (a *realApp) notePIDs() {
	entries, _ := os.ReadDir(a.folder())
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(a.folder(), e.Name(), a.pidFile)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && !slices.Contains(a.pids, pid) {
				a.pids = append(a.pids, pid)
			}
		}
	}
}

// noneOutlived fails the test for each noted daemon still running.
func (a *realApp) noneOutlived() {
	a.t.Helper()
	for _, pid := range a.pids {
		if running(pid) {
			a.t.Errorf("the daemon of pid %d (from a member's %s) outlived the delete", pid, a.pidFile)
		}
	}
}
