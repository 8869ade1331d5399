package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// TestDevRunsTheExampleAndKeepsStateAcrossRestarts is the README's first command: `dev -f`
// with the example app, on a SQLite file, with the Web UI.
//
// It runs before the parallel tests, not among them: the embedded server finds free ports
// for its internal services by binding port 0 and closing it, so two servers starting at
// the same moment can take the same port, and the loser exits.
func TestDevRunsTheExampleAndKeepsStateAcrossRestarts(t *testing.T) {
	guard(t)
	example := newExampleDev(t)
	dir, data, grpcAddr, uiAddr, args := example.dir, example.data, example.grpcAddr, example.uiAddr, example.args
	env := []string{"TEMPORAL_ADDRESS=" + grpcAddr}

	dev := startDev(t, dir, "dev-1", args)
	if err := dev.WaitFor("Phase:    ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(dev.Stdout)
	for _, want := range []string{"Temporal server:  " + grpcAddr, "Temporal Web UI:  http://" + uiAddr, "Logs:             " + filepath.Join(dir, "dev.log"), "controller → worker → edge"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("dev output lacks %q:\n%s", want, out)
		}
	}
	// dev serves the health gateway with a token only its user can read.
	tokenFile := filepath.Join(dir, "gateway-token")
	if !strings.Contains(string(out), "Health gateway:   http://"+example.gatewayAddr+"  (token in "+tokenFile+")") {
		t.Errorf("dev output does not say where the gateway and its token are:\n%s", out)
	}
	token := devGatewayToken(t, tokenFile)
	if s := gatewayStatus(t, example.gatewayAddr, token, "demo"); s.Phase != workflows.PhaseReady {
		t.Errorf("the gateway's status of demo: %q, want ready", s.Phase)
	}
	// dev serves its metrics where it says: the demo's members as status counts them, its
	// deploy, and the agent running its members' checks.
	if !strings.Contains(string(out), "Metrics:          http://"+example.metricsAddr+"/metrics") {
		t.Errorf("dev output does not say where its metrics are:\n%s", out)
	}
	wantMetrics := []string{
		`clusterflow_members{cluster="demo",role="controller",state="ready"} 1`,
		`clusterflow_members{cluster="demo",role="worker",state="ready"} 3`,
		`clusterflow_members{cluster="demo",role="edge",state="ready"} 1`,
		`clusterflow_cluster_phase{cluster="demo",phase="ready"} 1`,
		`clusterflow_agent_up 1`,
	}
	var metrics string
	// The state is read in the background, every 10 s at most while scraped.
	waitFor(t, "dev's metrics to show the demo ready", func() bool {
		metrics = httpGet(t, "http://"+example.metricsAddr+"/metrics")
		for _, want := range wantMetrics {
			if !strings.Contains(metrics, want+"\n") {
				return false
			}
		}
		return true
	})
	if !regexp.MustCompile(`(?m)^clusterflow_operation_seconds_count\{[^}]*cluster="demo"[^}]*kind="deploy"[^}]*result="ok"[^}]*\} 1$`).MatchString(metrics) {
		t.Errorf("dev's metrics do not count the demo's deploy:\n%s", metrics)
	}
	// The Web UI serves its pages, to the browser let in by the address dev printed, and
	// lists the cluster's workflow.
	ui := devUIClient(t, string(out), uiAddr)
	page := httpGetWith(t, ui, "http://"+uiAddr+"/namespaces/default/workflows")
	if !strings.Contains(page, "<html") {
		t.Errorf("UI page is not HTML: %.200s", page)
	}
	checkUIAssetsCached(t, ui, uiAddr, page)
	// The UI's list API filters on every cluster search attribute.
	listAPI := func(query string) string {
		return httpGetWith(t, ui, "http://"+uiAddr+"/api/v1/namespaces/default/workflows?query="+url.QueryEscape(query))
	}
	if list := listAPI(`ClusterName = "demo" AND ClusterPhase = "ready" AND ClusterRoles = "edge" AND ClusterMembers = 5`); !strings.Contains(list, "cluster/demo") {
		t.Errorf("UI API does not list cluster/demo by its search attributes: %.500s", list)
	}
	if list := listAPI(`ClusterName = "demo" AND ClusterPhase = "failed"`); strings.Contains(list, "cluster/demo") {
		t.Errorf("UI API lists the ready cluster/demo as failed: %.500s", list)
	}
	checkDevRefusesForeignHosts(t, ui, uiAddr, filepath.Join(dir, "dev.log"), filepath.Join(dir, "tls"))
	// What dev keeps (every workflow's inputs, logs, the gateway's token, the UI's secret,
	// the server's certificates and keys) is its user's alone.
	for _, f := range []string{"dev.db", "dev.db-wal", "gateway-token", "ui-token", "dev.log", "tls/ca-key.pem", "tls/client-key.pem", "tls/server-key.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, statMode(fi, err))
		}
	}
	if services := testenv.MemberProcesses(data); len(services) == 0 {
		t.Error("the controller's registry service is not running")
	}
	if code, err := dev.Signal(syscall.SIGINT, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("dev did not stop cleanly on SIGINT: exit %d, %v\n%s", code, err, dev.Output())
	}
	if out, _ := os.ReadFile(dev.Stdout); !strings.Contains(string(out), "The member agent (pid") {
		t.Errorf("dev did not say its agent carries on:\n%s", out)
	}
	// Ctrl-C is quiet: the server's and worker's logs, shutdown noise included, go to the
	// log file beside the database, and the terminal keeps progress and status.
	if errOut, _ := os.ReadFile(dev.Stderr); len(strings.TrimSpace(string(errOut))) > 0 {
		t.Errorf("dev wrote to stderr:\n%s", errOut)
	}
	if logs, err := os.ReadFile(filepath.Join(dir, "dev.log")); err != nil || !strings.Contains(string(logs), "Started Worker") {
		t.Errorf("the worker's logs are not in dev.log beside dev.db (%v):\n%.2000s", err, logs)
	}

	// Same database: the cluster is still there, and dev shows it rather than failing.
	dev = startDev(t, dir, "dev-2", args)
	if err := dev.WaitFor("already exists in this database", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitFor("Phase:    ready", time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := testenv.Run(ctx, dir, env, "status", "demo", "-o", "json")
	if err != nil || res.Code != 0 {
		t.Fatalf("status: %v %s", err, res)
	}
	var s workflows.ClusterStatus
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil || s.Phase != workflows.PhaseReady || len(s.Roles) != 3 {
		t.Fatalf("status after restart: %v %+v", err, s)
	}
	// The gateway keeps its token across restarts, so what calls it keeps working.
	if again := devGatewayToken(t, filepath.Join(dir, "gateway-token")); again != token {
		t.Error("dev made a new gateway token on restart")
	}
	if s := gatewayStatus(t, example.gatewayAddr, token, "demo"); s.Phase != workflows.PhaseReady {
		t.Errorf("the gateway's status of demo after restart: %q", s.Phase)
	}
	if res, err = testenv.Run(ctx, dir, env, "delete", "demo", "--wait"); err != nil || res.Code != 0 {
		t.Fatalf("delete: %v %s", err, res)
	}
	if left := testenv.MemberProcesses(data); len(left) > 0 {
		t.Errorf("processes left after delete: %v", left)
	}
	if exists(clusterDir(data, "demo")) {
		t.Error("sandboxes left after delete")
	}
	if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("dev did not stop cleanly on SIGTERM: exit %d, %v\n%s", code, err, dev.Output())
	}
}

// A server that cannot start says why on the terminal, although dev's logs go to a file.
func TestDevSaysWhyItCannotStart(t *testing.T) {
	guard(t)
	taken, err := net.Listen("tcp", freeAddress(t))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := testenv.Run(ctx, dir, nil, "dev", "--no-ui", "--no-worker", "--no-gateway", "--db", filepath.Join(dir, "dev.db"), "--address", taken.Addr().String())
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "address already in use") {
		t.Errorf("dev on a taken address: %v %s", err, res)
	}
}

// The clusterflow binary links no Temporal server: its `dev` runs clusterflow-dev. A
// clusterflow alone, as `go run ./cmd/clusterflow dev` builds it, builds clusterflow-dev
// from its own checkout into the user's cache and runs that (here, on a taken address, the
// embedded server's own refusal shows that it ran). Without Go or a checkout at hand, dev
// says what to build.
func TestALoneClusterflowRunsDevFromItsCheckout(t *testing.T) {
	guard(t)
	bin, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lone := filepath.Join(dir, "bin", "clusterflow")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(lone), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", freeAddress(t))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	devArgs := []string{"dev", "--no-ui", "--no-worker", "--no-gateway", "--db", filepath.Join(dir, "dev.db"), "--address", taken.Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Go's own build cache stays where it is, so the build only links.
	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	env := []string{"XDG_CACHE_HOME=" + cache, "GOCACHE=" + strings.TrimSpace(string(goCache)), "CLUSTERFLOW_DEV_BINARY="}
	res, err := testenv.RunBinary(ctx, lone, dir, env, devArgs...)
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "address already in use") {
		t.Fatalf("dev from a lone clusterflow on a taken address: %v %s", err, res)
	}
	built, _ := filepath.Glob(filepath.Join(cache, "clusterflow", "dev-*", "clusterflow-dev"))
	if len(built) != 1 {
		t.Fatalf("clusterflow-dev built into the cache: %v, want one", built)
	}

	// No Go on PATH, and no clusterflow-dev beside it or on PATH.
	env = []string{"XDG_CACHE_HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "CLUSTERFLOW_DEV_BINARY="}
	res, err = testenv.RunBinary(ctx, lone, dir, env, devArgs...)
	if err != nil || res.Code == 0 || !strings.Contains(res.Stderr, "go build ./cmd/clusterflow ./cmd/clusterflow-dev") || !strings.Contains(res.Stderr, "CLUSTERFLOW_DEV_BINARY") {
		t.Errorf("dev with nothing to run should say what to build: %v %s", err, res)
	}
}

// TestExampleNeedsItsDependencyOrder shows the example is honest: without dependsOn, its
// workers come up beside the controller and fail.
func TestExampleNeedsItsDependencyOrder(t *testing.T) {
	t.Parallel()
	guard(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples/registry"))); err != nil {
		t.Fatal(err)
	}
	specText, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	unordered := strings.Replace(strings.Replace(string(specText), "name: demo", "name: unordered", 1), "dependsOn: [controller]", "", 1)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(unordered), 0o644); err != nil {
		t.Fatal(err)
	}
	res := cli(t, "deploy", "-f", filepath.Join(dir, "cluster.yaml"), "--wait")
	if res.Code != 1 || !strings.Contains(res.Stdout, "no ready controller") {
		t.Fatalf("workers should fail without their controller: %s", res)
	}
	if res := cli(t, "delete", "unordered", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
}

// TestTwoDemosOfTwoDataFoldersComeUpSideBySide runs the README's example twice on one
// machine, as two dev servers of two data folders would: each controller serves the port
// its host gave it and knows its own service from another's, so the second demo's workers
// register with their own controller, and still can once the first demo is gone.
func TestTwoDemosOfTwoDataFoldersComeUpSideBySide(t *testing.T) {
	t.Parallel()
	guard(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples/registry/cluster.yaml")
	first, second := newServerStack(t), newServerStack(t)
	for _, s := range []*stack{first, second} {
		s.startWorker()
		if res := s.cli("deploy", "-f", example, "--wait"); res.Code != 0 {
			t.Fatalf("deploy demo: %s", res)
		}
	}
	if res := first.cli("delete", "demo", "--wait"); res.Code != 0 {
		t.Fatalf("delete the first demo: %s", res)
	}
	if res := second.cli("resize", "demo", "worker=4", "--wait"); res.Code != 0 {
		t.Fatalf("the second demo's new worker could not register with its own controller: %s", res)
	}
	// The Web UI shows the cluster as it is now in its current details, and says that its
	// summary is the cluster as deployed.
	if details := currentDetails(t, second, workflows.ClusterWorkflowID("demo")); !strings.Contains(details, "| worker | 1 | 4 | ready 4 |") ||
		!strings.Contains(details, "| controller | 0 | 1 | ready 1 |") {
		t.Errorf("after a resize to 4 workers, the current details show:\n%s", details)
	}
	if summary := staticSummary(t, second, workflows.ClusterWorkflowID("demo")); summary != "demo: 3 roles, 5 members (controller → worker → edge), as deployed" {
		t.Errorf("the static summary is %q", summary)
	}
	if res := second.cli("delete", "demo", "--wait"); res.Code != 0 {
		t.Fatalf("delete the second demo: %s", res)
	}
}

// exampleDev is the README's first command, `clusterflow dev -f` with the example app, set
// up in a fresh folder with free addresses; its agent and services are stopped at the end.
type exampleDev struct {
	dir, data, grpcAddr, uiAddr, gatewayAddr, metricsAddr string
	args                                                  []string
}

func newExampleDev(t *testing.T) exampleDev {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := exampleDev{dir: t.TempDir(), grpcAddr: freeAddress(t), uiAddr: freeAddress(t), gatewayAddr: freeAddress(t), metricsAddr: freeAddress(t)}
	d.data = filepath.Join(d.dir, "data")
	testenv.StopAllAtEnd(t, d.data)
	t.Cleanup(func() {
		if t.Failed() { // dev's own logs, a fatal error of the server included, go to its log file
			t.Logf("dev's log:\n%s", tailOfFiles(filepath.Join(d.dir, "dev.log")))
		}
	})
	d.args = []string{"dev", "-f", filepath.Join(root, "examples/registry/cluster.yaml"),
		"--db", filepath.Join(d.dir, "dev.db"), "--data", d.data, "--address", d.grpcAddr, "--ui-address", d.uiAddr, "--gateway-address", d.gatewayAddr, "--metrics-address", d.metricsAddr}
	return d
}

func startDev(t *testing.T, dir, name string, args []string) *testenv.Process {
	t.Helper()
	p, err := testenv.Start(dir, dir, name, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func freeAddress(t *testing.T) string {
	t.Helper()
	address, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	return address
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	return httpGetWith(t, &http.Client{Timeout: 30 * time.Second}, u)
}

func httpGetWith(t *testing.T, client *http.Client, u string) string {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, body)
	}
	return string(body)
}

// devGatewayToken reads dev's gateway token, which must be readable by its owner only.
func devGatewayToken(t *testing.T, file string) string {
	t.Helper()
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", file, info.Mode().Perm())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// gatewayStatus is GET /v1/clusters/NAME with the token.
func gatewayStatus(t *testing.T, addr, token, name string) workflows.ClusterStatus {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/clusters/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET the gateway: %v", err)
	}
	defer resp.Body.Close()
	var s workflows.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&s); resp.StatusCode != 200 || err != nil {
		t.Errorf("GET /v1/clusters/%s: %d %v", name, resp.StatusCode, err)
	}
	return s
}

// The README suggests `dev --hosts N` to watch placement: the example comes up there, with
// a worker on each host, whether dev deploys it itself or a client deploys it right after
// dev starts, before its hosts have registered (a fleet never places a member without a
// host, so it waits for them).
func TestTheExampleRunsOnDevWithThreeHosts(t *testing.T) {
	guard(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples/registry/cluster.yaml")
	for _, byDev := range []bool{true, false} {
		dir := t.TempDir()
		for _, h := range []string{"host-1", "host-2", "host-3"} {
			testenv.StopAllAtEnd(t, filepath.Join(dir, "hosts", h))
		}
		address := freeAddress(t)
		args := []string{"dev", "--hosts", "3", "--no-ui", "--no-gateway", "--db", filepath.Join(dir, "dev.db"),
			"--data", filepath.Join(dir, "data"), "--address", address, "--log-file", filepath.Join(dir, "dev.log")}
		if byDev {
			args = append(args, "-f", example)
		}
		dev := startDev(t, dir, "dev-example-hosts", args)
		env := []string{"TEMPORAL_ADDRESS=" + address}
		if !byDev {
			// As soon as the server answers, before the hosts have registered.
			waitFor(t, "dev's server to answer", func() bool { return run(t, env, "list").Code == 0 })
			if res := run(t, env, "deploy", "-f", example, "--wait", "--timeout", "100s"); res.Code != 0 {
				t.Fatalf("deploy right after dev started: %s\ndev: %s", res, dev.Output())
			}
		}
		var s workflows.ClusterStatus
		waitUpTo(t, 100*time.Second, "the example ready on three hosts", func() bool {
			res := run(t, env, "status", "demo", "-o", "json")
			return res.Code == 0 && json.Unmarshal([]byte(res.Stdout), &s) == nil && s.Phase == workflows.PhaseReady
		})
		var hosts []string
		for _, m := range s.Role("worker").Members {
			hosts = append(hosts, m.Host)
		}
		slices.Sort(hosts)
		if !slices.Equal(hosts, []string{"host-1", "host-2", "host-3"}) {
			t.Errorf("deployed by dev %v: workers on %v, want one on each host", byDev, hosts)
		}
		if res := run(t, env, "delete", "demo", "--wait"); res.Code != 0 {
			t.Errorf("delete: %s", res)
		}
		if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
			t.Errorf("dev did not stop cleanly: exit %d, %v", code, err)
		}
	}
}

// devUILogin is the address of dev's Web UI, with the secret that lets a browser in, as
// dev printed it in out.
func devUILogin(t *testing.T, out, uiAddr string) string {
	t.Helper()
	m := regexp.MustCompile(`Temporal Web UI:  (http://` + regexp.QuoteMeta(uiAddr) + `\S*token=\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dev printed no Web UI address with its secret:\n%s", out)
	}
	return m[1]
}

// devUIClient is a browser let in to dev's Web UI by the address dev printed in out.
func devUIClient(t *testing.T, out, uiAddr string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Timeout: 30 * time.Second, Jar: jar}
	if page := httpGetWith(t, c, devUILogin(t, out, uiAddr)); !strings.Contains(page, "<html") {
		t.Fatalf("the UI's address with its secret: %.200s", page)
	}
	return c
}

// checkDevRefusesForeignHosts checks that dev's Web UI and Temporal's HTTP API answer only
// requests that name them by their own address: a page that rebinds its own domain to
// 127.0.0.1 (DNS rebinding) sends its domain as Host, and is refused, while the same
// request by address is served, to a browser let in (ui) and a client with the server's
// client certificate (from tlsDir). Without them, neither answers.
func checkDevRefusesForeignHosts(t *testing.T, ui *http.Client, uiAddr, logFile, tlsDir string) {
	t.Helper()
	log, _ := os.ReadFile(logFile)
	m := regexp.MustCompile(`Temporal HTTP API serving.*"address": "([0-9.:]+)"`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("dev's log does not say where Temporal's HTTP API is:\n%s", log)
	}
	withCert := devTLSClient(t, tlsDir)
	stranger := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		what, url string
		client    *http.Client
	}{
		{"the Web UI's API", "http://" + uiAddr + "/api/v1/namespaces/default/workflows", ui},
		{"the Web UI's page", "http://" + uiAddr + "/namespaces/default/workflows", ui},
		{"Temporal's HTTP API", "https://" + string(m[1]) + "/api/v1/namespaces/default/workflows", withCert},
	} {
		// Whoever lacks the session or the certificate is refused, whatever it names.
		if resp, err := stranger.Get(tc.url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "cluster/demo") {
				t.Errorf("%s answered a client without its session or certificate: %d %.200s", tc.what, resp.StatusCode, body)
			}
		}
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"evil.example", "evil.example:" + u.Port(), ""} {
			req, err := http.NewRequest("GET", tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if host != "" {
				req.Host = host
			}
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatalf("%s with Host %q: %v", tc.what, host, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served := resp.StatusCode == http.StatusOK
			switch {
			case host != "" && (served || strings.Contains(string(body), "cluster/demo")):
				t.Errorf("%s answered Host %q: %d %.200s", tc.what, host, resp.StatusCode, body)
			case host == "" && !served:
				t.Errorf("%s refused its own address: %d %.200s", tc.what, resp.StatusCode, body)
			}
		}
	}
}

// devTLSClient is an HTTPS client with dev's client certificate, from its tls folder.
func devTLSClient(t *testing.T, tlsDir string) *http.Client {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "client.pem"), filepath.Join(tlsDir, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(tlsDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "localhost",
	}}}
}

func statMode(fi os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fi.Mode().Perm().String()
}

// checkUIAssetsCached checks that the browser may keep the UI's content-named assets, which
// the page loads by the hundred, and only those: the page itself is asked for afresh.
func checkUIAssetsCached(t *testing.T, ui *http.Client, uiAddr, page string) {
	t.Helper()
	asset := regexp.MustCompile(`/_app/immutable/[^"']+\.js`).FindString(page)
	if asset == "" {
		t.Errorf("the UI page names no asset under /_app/immutable/: %.500s", page)
		return
	}
	for path, want := range map[string]string{asset: "private, max-age=31536000, immutable", "/namespaces/default/workflows": ""} {
		resp, err := ui.Get("http://" + uiAddr + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		resp.Body.Close()
		if got := resp.Header.Get("Cache-Control"); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("GET %s: %d, Cache-Control %q, want 200 and %q", path, resp.StatusCode, got, want)
		}
	}
}
