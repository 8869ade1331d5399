package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// stack is a private `clusterflow dev --no-worker` server plus a separate `clusterflow
// worker`, for tests that kill and restart them.
type stack struct {
	t             *testing.T
	dir, data, db string
	address       string
	env           []string
	dev, worker   *testenv.Process
	// trace is the trace file of the cluster under test, once deployed.
	trace             string
	devRuns, workRuns int
	// serve starts the stack's server for the nth time: `clusterflow dev`, or Temporal's own
	// server on PostgreSQL.
	serve func(n int) *testenv.Process
	// connect, when set, connects to the server as its clients do (a production stack's,
	// with the hosts' certificate); otherwise dev's client profile is.
	connect func() (client.Client, error)
}

func newStack(t *testing.T) *stack {
	s := newServerStack(t)
	s.startWorker()
	return s
}

// newServerStack is a stack with its server running on loopback and no worker yet.
func newServerStack(t *testing.T) *stack { return newServerStackAt(t, freeAddress(t)) }

// newServerStackAt is a stack whose server listens on address.
func newServerStackAt(t *testing.T, address string) *stack {
	dir := t.TempDir()
	s := &stack{t: t, dir: dir, data: filepath.Join(dir, "data"), db: filepath.Join(dir, "dev.db"), address: address}
	s.env = []string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_NAMESPACE=default"}
	s.serve = func(n int) *testenv.Process {
		return s.start("dev", n, "Ready.", "dev", "--no-worker", "--no-ui", "--no-gateway", "--db", s.db, "--address", s.address)
	}
	testenv.StopAllAtEnd(t, s.data)
	t.Cleanup(func() {
		if t.Failed() { // the stack's folder goes with the test: show what its processes said
			t.Logf("the stack's logs:\n%s", tailOfFiles(filepath.Join(dir, "worker-*.stderr"), filepath.Join(s.data, "agent", "agent.log")))
		}
	})
	s.startDev()
	return s
}

func (s *stack) startDev() {
	s.t.Helper()
	s.devRuns++
	s.dev = s.serve(s.devRuns)
}

func (s *stack) startWorker() {
	s.t.Helper()
	s.workRuns++
	s.worker = s.start("worker", s.workRuns, "Worker starting", "worker", "--data", s.data)
}

func (s *stack) start(name string, n int, ready string, args ...string) *testenv.Process {
	s.t.Helper()
	return s.startWith(testenv.StartIn, "", s.env, name, n, ready, args...)
}

// startWith starts a process with start (testenv.StartIn or StartHost) in a test host's
// network namespace ("" for the test's own).
func (s *stack) startWith(start func(namespace, dir, logDir, name string, env []string, args ...string) (*testenv.Process, error),
	namespace string, env []string, name string, n int, ready string, args ...string) *testenv.Process {
	s.t.Helper()
	p, err := start(namespace, s.dir, s.dir, name+"-"+string(rune('0'+n)), env, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Stop)
	if err := p.WaitFor(ready, time.Minute); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// kill ends a process with SIGKILL: no chance to clean up.
func (s *stack) kill(p *testenv.Process) {
	s.t.Helper()
	if _, err := p.Signal(syscall.SIGKILL, 10*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) cli(args ...string) testenv.Result {
	s.t.Helper()
	return run(s.t, s.env, args...)
}

// status is the cluster's status from the stack's server.
func (s *stack) status(name string) workflows.ClusterStatus {
	s.t.Helper()
	res := s.cli("status", name, "-o", "json")
	if res.Code != 0 {
		s.t.Fatalf("status: %s", res)
	}
	var status workflows.ClusterStatus
	if err := json.Unmarshal([]byte(res.Stdout), &status); err != nil {
		s.t.Fatal(err)
	}
	return status
}

// dial is a client of the stack's server, for the caller to close.
// namespaceID is the ID of the stack's default namespace.
func (s *stack) namespaceID() string {
	s.t.Helper()
	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := starter.New(c, "").NamespaceID(ctx, "default")
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}

func (s *stack) dial() client.Client {
	s.t.Helper()
	connect := s.connect
	if connect == nil {
		connect = func() (client.Client, error) { return testenv.Dial(s.address) }
	}
	c, err := connect()
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// history reads a workflow's history from the stack's server.
func (s *stack) history(workflowID string) []*historypb.HistoryEvent {
	s.t.Helper()
	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hist, err := testenv.History(ctx, c, workflowID)
	if err != nil {
		s.t.Fatal(err)
	}
	return hist.Events
}

// tailOfFiles is the last 60 lines of each file matching the patterns, for a failed test's
// log.
func tailOfFiles(patterns ...string) string {
	var b strings.Builder
	for _, pattern := range patterns {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, _ := os.ReadFile(file)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			fmt.Fprintf(&b, "== %s\n%s\n", file, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	}
	return b.String()
}
