package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// newProductionStack is a stack whose server is Temporal's own, on a private PostgreSQL,
// configured as docker-compose.yml configures it (testenv.ProductionServer), with
// `clusterflow setup` run against it and no clusterflow worker yet.
func newProductionStack(t *testing.T) *stack {
	t.Helper()
	// Members pass through it to nothing of the server's: the certificates' folders are
	// their users' alone, as in the compose file's volumes.
	dir := sharedDir(t, "cf-compose-", 0o711)
	server, err := testenv.NewProductionServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	s := &stack{t: t, dir: dir, data: filepath.Join(dir, "data"), address: server.Address}
	// Its clients are as the compose file's hosts: with their client certificate.
	s.env = append([]string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_NAMESPACE=default"}, server.ClientEnv...)
	s.connect = server.Dial
	s.serve = func(n int) *testenv.Process {
		p, err := server.Start("temporal-server-" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	testenv.StopAllAtEnd(t, s.data)
	t.Cleanup(func() {
		if t.Failed() {
			logs := append(server.Logs(), filepath.Join(dir, "worker-*.stderr"), filepath.Join(dir, "host-*.stderr"))
			t.Logf("the production stack's logs:\n%s", tailOfFiles(logs...))
		}
	})
	s.startDev()
	if res := s.cli("setup"); res.Code != 0 {
		t.Fatalf("clusterflow setup: %s", res)
	}
	return s
}

func TestComposeServerConfigurationIsWhatTheTestsRun(t *testing.T) {
	t.Parallel()
	guard(t)
	service := readCompose(t).Services["temporal"]
	if service.Environment["DB"] != "postgres12" {
		t.Errorf("the compose file's server uses DB %q; the production tests run postgres12", service.Environment["DB"])
	}
	for key, why := range testenv.ComposeOverrides {
		if _, ok := service.Environment[key]; !ok {
			t.Errorf("the compose file's server sets no %s; the tests override it (%s)", key, why)
		}
	}
}

// The compose file's server takes a fleet. Each host keeps 16 activity polls open, 8 on
// its own task queue and 8 on the shared one: past 75 hosts that is more than Temporal's
// default of 1,200 polls a frontend, which refuses the rest ("namespace concurrent poller
// limit exceeded") and leaves hosts' work waiting. And each host's queue must be one
// partition, not the default four: a fleet's thousands of queues loaded four times over
// kept 2,000 hosts from registering (bench/fleet.sh, SERVER=postgres). 80 simulated hosts
// keep a real host's 16 polls each (on their own queues), beside a real host, on
// Temporal's own server with the compose file's dynamic config. No host polls its queue
// for workflow tasks, which never come there.
func TestTheComposeServerTakesEveryPollOfAFleet(t *testing.T) {
	t.Parallel()
	guard(t)
	started := time.Now()
	s := newProductionStack(t)
	s.startWorker()
	const hosts, polls = 80, 16
	p := simulate(t, s, "fleet", "sim-", hosts, 5*time.Minute, "--polls", strconv.Itoa(polls))
	s.startWith(testenv.StartHost, "", s.env, "host-real", 1, "Worker starting",
		"worker", "--host", "real", "--host-address", "127.0.0.1", "--data", s.hostData("real"))
	t.Logf("the stack and its hosts started in %s", time.Since(started).Round(100*time.Millisecond))
	if err := p.WaitFor("Simulating hosts", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, time.Minute, time.Second, fmt.Sprintf("%d hosts ready", hosts+1), func() (bool, string) {
		return hostsIn(fleetHosts(t, s), workflows.HostReady, hosts+1)
	})
	t.Logf("%d hosts ready %s after the start", hosts+1, time.Since(started).Round(100*time.Millisecond))
	// Every poll is open now: a refused one would have been refused at once.
	if refused := strings.Count(p.Output(), "poller limit exceeded"); refused > 0 {
		t.Errorf("the server refused %d polls of %d hosts keeping %d each: %s", refused, hosts, polls, firstLineWith(p.Output(), "poller limit exceeded"))
	}

	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, host := range []string{"real", "sim-00042"} {
		queue := workflows.HostTaskQueue(workflows.DefaultTaskQueue, host)
		pollers := func(kind enumspb.TaskQueueType) int {
			resp, err := c.DescribeTaskQueue(ctx, queue, kind)
			if err != nil {
				t.Fatal(err)
			}
			return len(resp.GetPollers())
		}
		if wf, act := pollers(enumspb.TASK_QUEUE_TYPE_WORKFLOW), pollers(enumspb.TASK_QUEUE_TYPE_ACTIVITY); wf != 0 || act == 0 {
			t.Errorf("host %s's queue has %d workflow pollers and %d activity pollers; want none and some", host, wf, act)
		}
	}
	for queue, want := range map[string]int{workflows.DefaultTaskQueue: 4, workflows.HostTaskQueue(workflows.DefaultTaskQueue, "sim-00042"): 1} {
		resp, err := c.WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
			Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(resp.GetActivityTaskQueuePartitions()); got != want {
			t.Errorf("task queue %s has %d activity partitions, want %d", queue, got, want)
		}
	}
}

// firstLineWith is the first line of out that holds text.
func firstLineWith(out, text string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, text) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
