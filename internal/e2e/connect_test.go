package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/devserver"
	"github.com/clusterflow/clusterflow/internal/testenv"
)

// startServer starts a private in-process server for one test.
func startServer(t *testing.T, opts ...testenv.ServerOption) *testenv.Server {
	t.Helper()
	srv, err := testenv.StartServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// run runs the CLI with exactly the given environment on top of the test's own.
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

func TestSetupRegistersSearchAttributesOnAFreshServer(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testenv.WithoutSearchAttributes())
	env := []string{"TEMPORAL_ADDRESS=" + srv.Address()}
	all := "ClusterName, ClusterPhase, ClusterRoles, ClusterMembers"

	res := run(t, env, "worker", "--data", t.TempDir())
	if res.Code != 1 || !strings.Contains(res.Stderr, "ClusterMembers, ClusterName, ClusterPhase, ClusterRoles: run `clusterflow setup`") {
		t.Errorf("worker on a fresh server should ask for setup: %s", res)
	}
	res = run(t, env, "setup")
	if res.Code != 0 || !strings.Contains(res.Stdout, `Registered search attributes in namespace "default": `+all) {
		t.Errorf("first setup: %s", res)
	}
	res = run(t, env, "setup")
	if res.Code != 0 || !strings.Contains(res.Stdout, `Already present in namespace "default": `+all) || strings.Contains(res.Stdout, "Registered") {
		t.Errorf("second setup: %s", res)
	}
}

func TestWorkerAndCLIConnectWithMutualTLS(t *testing.T) {
	t.Parallel()
	certs, err := testenv.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, testenv.WithTLS(devserver.TLS{
		CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA, ServerName: "localhost",
	}))
	plain := []string{"TEMPORAL_ADDRESS=" + srv.Address()}
	env := slices.Concat(plain, []string{
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA,
		"TEMPORAL_TLS_CLIENT_CERT_PATH=" + certs.ClientCert,
		"TEMPORAL_TLS_CLIENT_KEY_PATH=" + certs.ClientKey,
		"TEMPORAL_TLS_SERVER_NAME=localhost",
	})
	// Without a client certificate the server turns the CLI away.
	if res := run(t, slices.Concat(plain, []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA}), "list"); res.Code == 0 {
		t.Fatalf("list without a client certificate should fail: %s", res)
	}
	if res := run(t, env, "setup"); res.Code != 0 {
		t.Fatalf("setup over mTLS: %s", res)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	t.Cleanup(func() { testenv.StopAll(data) })
	worker, err := testenv.Start(dir, dir, "worker", env, "worker", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Stop)
	if err := worker.WaitFor("Started Worker", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The deploy needs the worker and the agent it starts to reach the server over mTLS too.
	specPath, _ := writeCluster(t, `
name: secure
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	if res := run(t, env, "deploy", "-f", specPath, "--wait", "--timeout", "90s"); res.Code != 0 {
		t.Fatalf("deploy over mTLS: %s\nworker: %s", res, worker.Output())
	}
	if res := run(t, env, "delete", "secure", "--wait"); res.Code != 0 {
		t.Fatalf("delete over mTLS: %s", res)
	}
}
