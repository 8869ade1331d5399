// Package e2e drives clusterflow end to end: the built CLI against a real in-process
// Temporal server, with real startscript processes.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// Shared by every test in the package: one server, one `clusterflow worker` process.
var (
	server  *testenv.Server
	dataDir string
	// cliEnv points the CLI at the shared server.
	cliEnv []string
	// metricsURL is where the shared worker serves its Prometheus metrics.
	metricsURL string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if orders := os.Getenv(agentCallerEnv); orders != "" {
		return agentCaller(orders)
	}
	defer testenv.RemoveBuilds()
	// The tests run as root and hand scripts folders only root may reach (their temporary
	// folders), so the workers they start run scripts as root too; the tests of script
	// users start theirs without this.
	os.Setenv("CLUSTERFLOW_ALLOW_ROOT_SCRIPTS", "1")
	// The programs the tests run are built before the tests, not in the one that needs
	// them, so that a cold build on a busy machine does not count against that test's
	// limit; and side by side, so that one's link overlaps the others' compiles.
	builds := []func() error{
		func() error { _, err := testenv.Binary(); return err },
		func() error { _, err := testenv.Alertmanager(); return err },
		func() error { _, err := testenv.Temporal(); return err },
	}
	errs := make([]error, len(builds))
	var built sync.WaitGroup
	for i, build := range builds {
		built.Go(func() { errs[i] = build() })
	}
	built.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	if server, err = testenv.StartServer(); err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		return 1
	}
	defer server.Stop()
	tmp, err := os.MkdirTemp("", "clusterflow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// Where the dev servers the tests start keep their client profiles (starter.DevProfilePath),
	// and the CLI runs they make find them: the tests' own, not the user's.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	dataDir = filepath.Join(tmp, "data")
	defer testenv.StopAll(dataDir)
	defer testlimit.OnAbort(func() { testenv.StopAll(dataDir) })()
	cliEnv = []string{"TEMPORAL_ADDRESS=" + server.Address(), "TEMPORAL_NAMESPACE=default"}
	metricsAddress, err := testenv.FreeAddress()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsURL = "http://" + metricsAddress + "/metrics"
	worker, err := testenv.Start(tmp, tmp, "worker", cliEnv, "worker", "--data", dataDir, "--metrics-address", metricsAddress)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start worker:", err)
		return 1
	}
	defer worker.Stop()
	if err := worker.WaitFor("Worker starting", 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "worker output:\n"+worker.Output())
	}
	return code
}

// run runs the clusterflow binary with env added to the test's own environment.
func run(t *testing.T, env []string, args ...string) testenv.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := testenv.Run(ctx, t.TempDir(), env, args...)
	if err != nil {
		t.Fatalf("clusterflow %v: %v", args, err)
	}
	return res
}

// cli runs the clusterflow binary against the shared server.
func cli(t *testing.T, args ...string) testenv.Result {
	t.Helper()
	return run(t, cliEnv, args...)
}

// guard fails the whole suite, rather than letting it hang until CI's limit, when the test
// runs past testlimit.TestLimit. Every test calls it first, after t.Parallel (whose wait
// must not count); TestEveryTestIsGuarded checks that none forgets.
func guard(t *testing.T) {
	testlimit.Guard(t, testlimit.TestLimit)
}

// guardFor is guard with another limit: a shorter one, or a longer one for a test that a
// bench script runs at full size (past testlimit.TestLimit the guard fails the test in the
// suite, so that no test grows past the suite's budget).
func guardFor(t *testing.T, limit time.Duration) {
	testlimit.Guard(t, limit)
}
