package e2e

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// newProductionStack is a stack whose server is Temporal's own, on a private PostgreSQL,
// configured as docker-compose.yml configures it (testenv.ProductionServer), with
// `clusterflow setup` run against it and no clusterflow worker yet.
func newProductionStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	server, err := testenv.NewProductionServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	s := &stack{t: t, dir: dir, data: filepath.Join(dir, "data"), address: server.Address}
	s.env = []string{"TEMPORAL_ADDRESS=" + s.address, "TEMPORAL_NAMESPACE=default"}
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
