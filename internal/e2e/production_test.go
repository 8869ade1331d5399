package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// The production path of docker-compose.yml, run without Docker: PostgreSQL, the schema job
// (deploy/temporal-schema.sh with the server's own SQL tool), the Temporal server's official
// entry point with the environment the compose file gives the temporalio/server image, the
// namespace job, and `clusterflow setup`.

// composeOverrides are the only settings the test changes from docker-compose.yml's, and
// why: a test binds loopback only, on ports it reserved, and reads files from the checkout
// rather than from the container's mounts.
var composeOverrides = map[string]string{
	"POSTGRES_SEEDS":           "postgresql is the compose service's host name; here the database listens on loopback",
	"DB_PORT":                  "a reserved port, not 5432",
	"BIND_ON_IP":               "loopback, not every interface",
	"DYNAMIC_CONFIG_FILE_PATH": "the file the compose file mounts, read from the checkout",
}

// newProductionStack is a stack whose server is Temporal's own, on a private PostgreSQL,
// configured as docker-compose.yml configures it; with no clusterflow worker yet.
func newProductionStack(t *testing.T) *stack {
	t.Helper()
	compose := readCompose(t)
	tools, err := testenv.Temporal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := compose.Services["postgresql"].Environment
	pg, err := testenv.StartPostgres(dir, db["POSTGRES_USER"], db["POSTGRES_PASSWORD"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	runSchemaJob(t, compose, tools, pg)

	serverEnv := productionServerEnv(t, compose, pg)
	address := "127.0.0.1:" + envValue(serverEnv, "FRONTEND_GRPC_PORT")
	s := &stack{t: t, dir: dir, data: filepath.Join(dir, "data"), address: address}
	s.env = []string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_NAMESPACE=default"}
	s.serve = func(n int) *testenv.Process {
		p, err := testenv.StartProgram(tools.Server, dir, dir, "temporal-server-"+strconv.Itoa(n), serverEnv, "start")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		createNamespace(t, s.address, p)
		return p
	}
	testenv.StopAllAtEnd(t, s.data)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the production stack's logs:\n%s", tailOfFiles(filepath.Join(dir, "temporal-server-*.stderr"), filepath.Join(dir, "postgres.stderr"),
				filepath.Join(dir, "worker-*.stderr"), filepath.Join(dir, "host-*.stderr")))
		}
	})
	s.startDev()
	if res := s.cli("setup"); res.Code != 0 {
		t.Fatalf("clusterflow setup: %s", res)
	}
	return s
}

// runSchemaJob runs what the compose file's temporal-schema service runs, with its
// environment, against the private database.
func runSchemaJob(t *testing.T, compose composeFile, tools testenv.TemporalTools, pg *testenv.Postgres) {
	t.Helper()
	job := compose.Services["temporal-schema"]
	env := os.Environ()
	for k, v := range job.Environment {
		env = append(env, k+"="+v)
	}
	env = append(env, "SQL_HOST=127.0.0.1", "SQL_PORT="+strconv.Itoa(pg.Port), "TEMPORAL_SCHEMA_DIR="+tools.SchemaDir,
		"PATH="+filepath.Dir(tools.SQLTool)+string(os.PathListSeparator)+os.Getenv("PATH"))
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "deploy", "temporal-schema.sh"))
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Temporal schemas are up to date.") {
		t.Fatalf("the schema job: %v\n%s", err, out)
	}
}

// productionServerEnv is the compose file's environment for the temporal service, with
// composeOverrides applied and every port the server opens reserved.
func productionServerEnv(t *testing.T, compose composeFile, pg *testenv.Postgres) []string {
	t.Helper()
	service := compose.Services["temporal"]
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for k, v := range service.Environment {
		values[k] = v
	}
	// The dynamic config file is the one the compose file mounts where it points the server.
	mounted := ""
	for _, v := range service.Volumes {
		if src, dst, ok := strings.Cut(v, ":"); ok && strings.HasSuffix(strings.TrimSuffix(dst, ":ro"), values["DYNAMIC_CONFIG_FILE_PATH"]) {
			mounted = filepath.Join(root, src)
		}
	}
	if mounted == "" {
		t.Fatalf("docker-compose.yml mounts no file at DYNAMIC_CONFIG_FILE_PATH %q", values["DYNAMIC_CONFIG_FILE_PATH"])
	}
	values["POSTGRES_SEEDS"], values["DB_PORT"], values["BIND_ON_IP"] = "127.0.0.1", strconv.Itoa(pg.Port), "127.0.0.1"
	values["DYNAMIC_CONFIG_FILE_PATH"] = mounted
	for _, name := range []string{"FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT", "FRONTEND_MEMBERSHIP_PORT", "HISTORY_GRPC_PORT",
		"HISTORY_MEMBERSHIP_PORT", "MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT", "WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT"} {
		address := freeAddress(t)
		values[name] = address[strings.LastIndexByte(address, ':')+1:]
	}
	var env []string
	for k, v := range values {
		env = append(env, k+"="+v)
	}
	return env
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// createNamespace does what the compose file's temporal-namespace job does, once the
// server answers: the default namespace with 7 days' retention, if it is not there yet.
func createNamespace(t *testing.T, address string, server *testenv.Process) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := tryCreateNamespace(address)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server on %s did not take the default namespace within 2 minutes: %v\n%s", address, err, server.Output())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tryCreateNamespace(address string) error {
	c, err := testenv.Dial(address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: "default", WorkflowExecutionRetentionPeriod: durationpb.New(7 * 24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace default: %w", err)
	}
	// The namespace is usable once the frontend's cache has it.
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err
}

func TestComposeServerConfigurationIsWhatTheTestsRun(t *testing.T) {
	t.Parallel()
	guard(t)
	service := readCompose(t).Services["temporal"]
	if service.Environment["DB"] != "postgres12" {
		t.Errorf("the compose file's server uses DB %q; the production tests run postgres12", service.Environment["DB"])
	}
	for key := range composeOverrides {
		if _, ok := service.Environment[key]; !ok {
			t.Errorf("the compose file's server sets no %s; the tests override it (%s)", key, composeOverrides[key])
		}
	}
}
