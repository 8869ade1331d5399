package e2e

import (
	"fmt"
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

func TestSetupRegistersSearchAttributesOnAFreshServer(t *testing.T) {
	t.Parallel()
	guard(t)
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
	// Setup returns once the server takes the attributes into use: a deploy right after it
	// is accepted (it starts the workflow; no worker is needed for that).
	specPath, _ := writeCluster(t, `
name: fresh
roles:
  - {name: only, members: 1, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	if res := run(t, env, "deploy", "-f", specPath); res.Code != 0 {
		t.Errorf("deploy right after setup: %s", res)
	}
	res = run(t, env, "setup")
	if res.Code != 0 || !strings.Contains(res.Stdout, `Already present in namespace "default": `+all) || strings.Contains(res.Stdout, "Registered") {
		t.Errorf("second setup: %s", res)
	}
}

func TestWorkerAndCLIConnectWithMutualTLS(t *testing.T) {
	t.Parallel()
	guard(t)
	srv, plain, env := startTLSServer(t)
	// Without a client certificate the server turns the CLI away.
	if res := run(t, slices.Concat(plain, []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + caOf(env)}), "list"); res.Code == 0 {
		t.Fatalf("list without a client certificate should fail: %s", res)
	}
	deployOver(t, srv, env, "secure")
}

func TestWorkerAndCLIConnectWithAnAPIKey(t *testing.T) {
	t.Parallel()
	guard(t)
	srv, _, env := startTLSServer(t, testenv.WithAPIKey("s3cret"))
	for _, bad := range [][]string{env, slices.Concat(env, []string{"TEMPORAL_API_KEY=wrong"})} {
		if res := run(t, bad, "list"); res.Code == 0 || !strings.Contains(res.Stderr, "PermissionDenied") && !strings.Contains(res.Stderr, "unauthorized") {
			t.Fatalf("list without the right API key should be refused: %s", res)
		}
	}
	// The key reaches the CLI, the worker and the agent through the environment.
	deployOver(t, srv, slices.Concat(env, []string{"TEMPORAL_API_KEY=s3cret"}), "keyed")
}

// startTLSServer starts a server requiring mutual TLS, and returns the environment that
// names only its address, and the one that also holds a CA, certificate and key.
func startTLSServer(t *testing.T, opts ...testenv.ServerOption) (srv *testenv.Server, plain, env []string) {
	t.Helper()
	certs, err := testenv.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, append(opts, testenv.WithTLS(devserver.TLS{
		CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA, ServerName: "localhost",
	}))...)
	plain = []string{"TEMPORAL_ADDRESS=" + srv.Address()}
	env = slices.Concat(plain, []string{
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA,
		"TEMPORAL_TLS_CLIENT_CERT_PATH=" + certs.ClientCert,
		"TEMPORAL_TLS_CLIENT_KEY_PATH=" + certs.ClientKey,
		"TEMPORAL_TLS_SERVER_NAME=localhost",
	})
	return srv, plain, env
}

func caOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TEMPORAL_TLS_SERVER_CA_CERT_PATH="); ok {
			return v
		}
	}
	return ""
}

// deployOver runs setup, a worker, and a deploy and delete of a small cluster, all with the
// given environment: the worker's agent must reach the server with it too.
func deployOver(t *testing.T, srv *testenv.Server, env []string, name string) {
	t.Helper()
	if res := run(t, env, "setup"); res.Code != 0 {
		t.Fatalf("setup: %s", res)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	worker, err := testenv.Start(dir, dir, "worker", env, "worker", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Stop)
	if err := worker.WaitFor("Started Worker", time.Minute); err != nil {
		t.Fatal(err)
	}
	specPath, _ := writeCluster(t, fmt.Sprintf(`
name: %s
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`, name))
	if res := run(t, env, "deploy", "-f", specPath, "--wait", "--timeout", "90s"); res.Code != 0 {
		t.Fatalf("deploy at %s: %s\nworker: %s", srv.Address(), res, worker.Output())
	}
	if res := run(t, env, "delete", name, "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
}
