package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// gatewayUnderTest is a `clusterflow gateway` process and the tokens it accepts.
type gatewayUnderTest struct {
	url                    string
	events, read, eventsRO string // tokens: events only, read only, events and read
	proc                   *testenv.Process
}

// startGateway runs `clusterflow gateway` against the server at env, with three tokens.
func startGateway(t *testing.T, env []string, extra ...string) *gatewayUnderTest {
	t.Helper()
	dir := t.TempDir()
	g := &gatewayUnderTest{}
	var lines []string
	for _, tok := range []struct {
		name, scope string
		secret      *string
	}{{"pager", "events", &g.events}, {"dashboard", "read", &g.read}, {"ops", "events,read", &g.eventsRO}} {
		res := cli(t, "gateway", "token", tok.name, "--scope", tok.scope)
		out := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if res.Code != 0 || len(out) != 2 || !strings.HasPrefix(out[1], tok.name+" "+tok.scope+" ") {
			t.Fatalf("gateway token %s: %s", tok.name, res)
		}
		*tok.secret = out[0]
		lines = append(lines, out[1])
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# name scopes sha256\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddress(t)
	g.url = "http://" + addr
	args := append([]string{"gateway", "--listen", addr, "--tokens-file", tokens}, extra...)
	p, err := testenv.Start(dir, dir, "gateway", env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	g.proc = p
	if err := p.WaitFor("Gateway serving", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return g
}

// do sends a request and returns the status and the body.
func (g *gatewayUnderTest) do(t *testing.T, method, path, token, contentType string, body []byte, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(out)
}

func (g *gatewayUnderTest) postEvent(t *testing.T, cluster, member, body string) (int, string) {
	t.Helper()
	code, _, out := g.do(t, "POST", fmt.Sprintf("/v1/clusters/%s/members/%s/events", cluster, member), g.events, "application/json", []byte(body))
	return code, out
}

// TestTheGatewayReportsEventsAndServesReads drives the gateway over HTTP against the real
// server and worker: an event moves a member and answers the transition, a repeat changes
// nothing, and the reads give what `list -o json` and `status -o json` give.
func TestTheGatewayReportsEventsAndServesReads(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "gwevents"
	specPath, _ := writeCluster(t, healthSpec(n, "1h"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := startGateway(t, cliEnv)

	code, out := g.postEvent(t, n, n+"-worker-1", `{"event":"down","reason":"disk full","source":"nagios"}`)
	var res workflows.MemberEventResult
	if err := json.Unmarshal([]byte(out), &res); code != 200 || err != nil || res.From != workflows.MemberReady || res.To != workflows.MemberDown {
		t.Fatalf("down: %d %s, want 200 ready → down", code, out)
	}
	if code, out := g.postEvent(t, n, n+"-worker-1", `{"event":"down"}`); code != 200 || strings.Contains(out, `"error"`) {
		t.Errorf("a repeated down: %d %s, want 200", code, out)
	}
	after := statusJSON(t, n)
	if m := after.Member(n + "-worker-1"); m == nil || m.State != workflows.MemberDown || !strings.Contains(m.Detail, "disk full") {
		t.Errorf("status after the event: %+v", m)
	}

	code, _, body := g.do(t, "GET", "/v1/clusters/"+n, g.read, "", nil)
	var viaHTTP workflows.ClusterStatus
	if err := json.Unmarshal([]byte(body), &viaHTTP); code != 200 || err != nil || viaHTTP.Name != n || viaHTTP.Member(n+"-worker-1") == nil {
		t.Errorf("GET /v1/clusters/%s: %d %.300s", n, code, body)
	}
	code, _, body = g.do(t, "GET", "/v1/clusters", g.read, "", nil)
	if code != 200 || !strings.Contains(body, `"`+n+`"`) {
		t.Errorf("GET /v1/clusters: %d %.300s", code, body)
	}
	if code, _, body := g.do(t, "GET", "/healthz", "", "", nil); code != 200 {
		t.Errorf("GET /healthz: %d %s", code, body)
	}
	code, _, body = g.do(t, "GET", "/metrics", g.read, "", nil)
	if code != 200 || !strings.Contains(body, `clusterflow_gateway_events_total{outcome="changed"} 1`) ||
		!strings.Contains(body, `clusterflow_gateway_requests_total{code="200",route="POST /v1/clusters/{cluster}/members/{member}/events"} 2`) {
		t.Errorf("GET /metrics: %d\n%s", code, body)
	}
	// The request log names the token, never its secret.
	if log := g.proc.Output(); !strings.Contains(log, "pager") || strings.Contains(log, g.events) {
		t.Errorf("the request log should name the token and hide its secret:\n%s", log)
	}
	mustSucceed(t, "delete", n, "--wait")
}
