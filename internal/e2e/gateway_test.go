package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// gatewayUnderTest is a `clusterflow gateway` process and the tokens it accepts.
type gatewayUnderTest struct {
	url                    string
	events, read, eventsRO string // tokens: events only, read only, events and read
	proc                   *testenv.Process
	// client, when set, is used instead of a plain one (for TLS).
	client *http.Client
}

// gatewayToken is a token to make with `clusterflow gateway token` for a gateway under test.
type gatewayToken struct {
	name, scope, clusters string
	secret                *string
}

// startGateway runs `clusterflow gateway` against the server at env, with three tokens for
// every cluster.
func startGateway(t *testing.T, env []string, extra ...string) *gatewayUnderTest {
	t.Helper()
	g := &gatewayUnderTest{}
	startGatewayWith(t, g, env, []gatewayToken{{"pager", "events", "", &g.events}, {"dashboard", "read", "", &g.read}, {"ops", "events,read", "", &g.eventsRO}}, extra...)
	return g
}

// startGatewayWith runs `clusterflow gateway` as g, accepting the tokens it makes.
func startGatewayWith(t *testing.T, g *gatewayUnderTest, env []string, tokens []gatewayToken, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for _, tok := range tokens {
		args := []string{"gateway", "token", tok.name, "--scope", tok.scope}
		clusters := "*"
		if tok.clusters != "" {
			args, clusters = append(args, "--clusters", tok.clusters), tok.clusters
		}
		res := cli(t, args...)
		out := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if res.Code != 0 || len(out) != 2 || !strings.HasPrefix(out[1], tok.name+" "+tok.scope+" "+clusters+" ") {
			t.Fatalf("gateway token %s: %s", tok.name, res)
		}
		*tok.secret = out[0]
		lines = append(lines, out[1])
	}
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("# name scopes clusters sha256\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddress(t)
	g.url = "http://" + addr
	args := append([]string{"gateway", "--listen", addr, "--tokens-file", file}, extra...)
	p, err := testenv.Start(dir, dir, "gateway", env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	g.proc = p
	if err := p.WaitFor("Gateway serving", 30*time.Second); err != nil {
		t.Fatal(err)
	}
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
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if g.client != nil {
		client = g.client
	}
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

	code, out := g.postEvent(t, n, n+"-worker-1", `{"event":"down","reason":"disk full","source":"nagios","at":"2026-12-01T06:00:00Z"}`)
	var res workflows.MemberEventResult
	if err := json.Unmarshal([]byte(out), &res); code != 200 || err != nil || res.From != workflows.MemberReady || res.To != workflows.MemberDown {
		t.Fatalf("down: %d %s, want 200 ready → down", code, out)
	}
	if code, out := g.postEvent(t, n, n+"-worker-1", `{"event":"down"}`); code != 200 || strings.Contains(out, `"error"`) {
		t.Errorf("a repeated down: %d %s, want 200", code, out)
	}
	after := statusJSON(t, n)
	if m := after.Member(n + "-worker-1"); m == nil || m.State != workflows.MemberDown || !strings.Contains(m.Detail, "disk full") ||
		m.Health == nil || len(m.Health.Transitions) != 1 || m.Health.Transitions[0].Source != "nagios" ||
		!m.Health.Transitions[0].ReportedAt.Equal(time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("status after the event and its repeat: %+v %+v", m, m.Health)
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
	// SIGTERM stops it once the requests in flight are answered. The request asks for
	// "100 Continue", which the server sends once the handler starts reading the body: from
	// then on the request is in flight, so the signal comes while the body is still unsent.
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	inFlight := `{"event":"up","source":"in flight"}`
	fmt.Fprintf(conn, "POST /v1/clusters/%s/members/%s-worker-1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", n, n, strings.TrimPrefix(g.url, "http://"), g.events, len(inFlight))
	answers := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(answers, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("the gateway did not start reading the request: %v %v", resp, err)
	}
	exited := make(chan int, 1)
	go func() {
		code, _ := g.proc.Signal(syscall.SIGTERM, 30*time.Second)
		exited <- code
	}()
	waitFor(t, "the gateway to stop taking connections", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(g.url, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	fmt.Fprint(conn, inFlight)
	resp, err := http.ReadResponse(answers, nil)
	if err != nil {
		t.Fatalf("the request in flight was dropped: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(answer), `"to":"ready"`) {
		t.Errorf("the request in flight: %d %s, want 200 down → ready", resp.StatusCode, answer)
	}
	if code := <-exited; code != 0 {
		t.Errorf("gateway on SIGTERM: exit %d\n%s", code, g.proc.Output())
	}
	mustSucceed(t, "delete", n, "--wait")
}

// TestTheGatewayServesTLS: with a certificate, the gateway speaks HTTPS only.
func TestTheGatewayServesTLS(t *testing.T) {
	t.Parallel()
	guard(t)
	certs, err := testenv.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, cliEnv, "--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey)
	if code, _, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil); code != 400 || !strings.Contains(body, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS gateway: %d %s", code, body)
	}
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	g.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	g.url = strings.Replace(g.url, "http://", "https://", 1)
	if code, _, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil); code != 200 || !strings.HasPrefix(body, "[") {
		t.Errorf("HTTPS: %d %s", code, body)
	}
}

// TestTheGatewayRefusesUnsafeSettings: it does not start without tokens, open to the
// network without them, open to every browser origin, or with a token file it cannot read.
func TestTheGatewayRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "tokens")
	if err := os.WriteFile(bad, []byte("pager events not-hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"gateway"}, "--tokens-file: the gateway needs tokens"},
		{[]string{"gateway", "--insecure-no-auth", "--listen", "0.0.0.0:0"}, "--insecure-no-auth: only allowed on a loopback --listen address"},
		{[]string{"gateway", "--insecure-no-auth", "--listen", "127.0.0.1:0", "--allowed-origins", "*"}, "--allowed-origins: '*' would let any web page"},
		{[]string{"gateway", "--tokens-file", bad}, "line 1: the last field must be the 64 hex digits"},
		{[]string{"gateway", "--tokens-file", filepath.Join(dir, "missing")}, "tokens file: open"},
		{[]string{"gateway", "--tls-cert", "cert.pem", "--insecure-no-auth"}, "--tls-cert and --tls-key: give both or neither"},
		{[]string{"gateway", "token", "pager", "--scope", "write"}, `--scope: scope "write" is not one of events, replace, read, codec`},
		{[]string{"gateway", "token", "pager", "--clusters", "team-[a"}, `--clusters: cluster glob "team-[a" is not a valid pattern`},
		{[]string{"gateway", "token", "two words"}, "must be non-empty, without spaces"},
	} {
		res := cli(t, tc.args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, tc.says) {
			t.Errorf("%v: %s, want exit 2 saying %q", tc.args, res, tc.says)
		}
	}
}

// TestTheGatewayRefusesBadInput sends one bad request per error the gateway answers, and
// then checks that none reached the cluster: its history holds no update or signal from
// them, and its members are as they were.
func TestTheGatewayRefusesBadInput(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "gwbad"
	specPath, _ := writeCluster(t, healthSpec(n, "1h"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := startGateway(t, cliEnv, "--allowed-origins", "https://ops.example.com")
	before := memberEventsIn(t, n)
	events := "/v1/clusters/" + n + "/members/" + n + "-worker-1/events"
	huge := append([]byte(`{"event":"down","reason":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	huge = append(huge, `"}`...)
	for _, tc := range []struct {
		name, method, path, token, contentType, body string
		header                                       []string
		want                                         int
		says                                         string
	}{
		{"malformed JSON", "POST", events, g.events, "application/json", `{"event":down}`, nil, 400, "body: not valid JSON"},
		{"truncated JSON", "POST", events, g.events, "application/json", `{"event":"down"`, nil, 400, "body: not valid JSON"},
		{"wrong type", "POST", events, g.events, "application/json", `{"event":5}`, nil, 400, "body: not valid JSON"},
		{"unknown field", "POST", events, g.events, "application/json", `{"evnt":"down"}`, nil, 400, "unknown field"},
		{"two values", "POST", events, g.events, "application/json", `{"event":"down"}{"event":"up"}`, nil, 400, "more than one JSON value"},
		{"unknown event", "POST", events, g.events, "application/json", `{"event":"explode"}`, nil, 400, `event: "explode" is not one of`},
		{"path escape in the member", "POST", "/v1/clusters/" + n + "/members/..%2F..%2Fetc%2Fpasswd/events", g.events, "application/json", `{"event":"down"}`, nil, 400, "member: "},
		{"bad cluster name", "POST", "/v1/clusters/GWBAD/members/" + n + "-worker-1/events", g.events, "application/json", `{"event":"down"}`, nil, 400, "cluster: "},
		{"unknown cluster", "POST", "/v1/clusters/nosuch/members/nosuch-worker-1/events", g.events, "application/json", `{"event":"down"}`, nil, 404, `cluster "nosuch" not found`},
		{"unknown member", "POST", "/v1/clusters/" + n + "/members/" + n + "-worker-9/events", g.events, "application/json", `{"event":"down"}`, nil, 404, n + "-worker-9"},
		{"oversize body", "POST", events, g.events, "application/json", string(huge), nil, 413, "over the limit"},
		{"not JSON", "POST", events, g.events, "text/plain", `{"event":"down"}`, nil, 415, "not application/json"},
		{"no content type", "POST", events, g.events, "", `{"event":"down"}`, nil, 415, "not application/json"},
		{"no token", "POST", events, "", "application/json", `{"event":"down"}`, nil, 401, "Authorization: missing"},
		{"wrong token", "POST", events, "cfgw_not-a-token", "application/json", `{"event":"down"}`, nil, 401, "not known"},
		{"read-only token", "POST", events, g.read, "application/json", `{"event":"down"}`, nil, 403, `token "dashboard" may not report events`},
		{"events-only token reads", "GET", "/v1/clusters/" + n, g.events, "", "", nil, 403, `token "pager" may not read`},
		{"alertmanager version 3", "POST", "/v1/alertmanager", g.events, "application/json", `{"version":"3","status":"firing","alerts":[{"status":"firing","labels":{"clusterflow_cluster":"` + n + `","clusterflow_member":"` + n + `-worker-1"}}]}`, nil, 400, "version:"},
		{"alertmanager not an object", "POST", "/v1/alertmanager", g.events, "application/json", `[1,2]`, nil, 400, "body: not valid JSON"},
		{"unknown route", "POST", "/v1/clusters/" + n + "/explode", g.events, "application/json", `{}`, nil, 404, "no route"},
		{"disallowed CORS preflight", "OPTIONS", events, "", "", "", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, 403, "may not call"},
	} {
		code, header, body := g.do(t, tc.method, tc.path, tc.token, tc.contentType, []byte(tc.body), tc.header...)
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); code != tc.want || err != nil || !strings.Contains(e.Error, tc.says) {
			t.Errorf("%s: %d %.300s, want %d with an error saying %q", tc.name, code, body, tc.want, tc.says)
		}
		if allow := header.Get("Access-Control-Allow-Origin"); allow != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q sent", tc.name, allow)
		}
	}
	// An allowed origin's preflight is answered, for that origin only.
	code, header, _ := g.do(t, "OPTIONS", events, "", "", nil, "Origin", "https://ops.example.com", "Access-Control-Request-Method", "POST")
	if code != 204 || header.Get("Access-Control-Allow-Origin") != "https://ops.example.com" {
		t.Errorf("allowed preflight: %d, allow origin %q", code, header.Get("Access-Control-Allow-Origin"))
	}

	// A cluster being deleted takes no more events.
	d := "gwdeleting"
	specPath, trace := writeCluster(t, strings.ReplaceAll(healthSpec(d, "1h"), "HOLD: TRACE_FILE.hold}", "HOLD: TRACE_FILE.hold, HOLD_TEARDOWN: TRACE_FILE.teardown}"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	holdOn(t, trace+".teardown")
	mustSucceed(t, "delete", d)
	waitFor(t, "the delete to start", func() bool { return statusJSON(t, d).Phase == workflows.PhaseDeleting })
	if code, out := g.postEvent(t, d, d+"-worker-1", `{"event":"down"}`); code != 409 || !strings.Contains(out, "delet") {
		t.Errorf("event during a delete: %d %s, want 409", code, out)
	}
	release(t, trace+".teardown")
	mustSucceed(t, "delete", d, "--wait")

	if after := memberEventsIn(t, n); after != before {
		t.Errorf("the refused requests left %d member events in the history (%d before)", after, before)
	}
	final := statusJSON(t, n)
	for _, m := range final.Role("worker").Members {
		if m.State != workflows.MemberReady || m.Health != nil {
			t.Errorf("%s changed: %s %+v", m.Name, m.State, m.Health)
		}
	}
	mustSucceed(t, "delete", n, "--wait")
}

// A token acts only on its clusters and within its scopes: a team's token gets 403 on
// another team's cluster (events, alerts and reads alike) and sees only its own clusters
// in the list; an events token may report down and up but not gone or unhealthy, which
// replace a member and delete its data. Nothing refused reaches a history.
func TestGatewayTokensAreScopedToClustersAndEvents(t *testing.T) {
	t.Parallel()
	guard(t)
	mine, theirs := "gwteam-a-1", "gwteam-b-1"
	for _, n := range []string{mine, theirs} {
		specPath, _ := writeCluster(t, healthSpec(n, "1h"))
		mustSucceed(t, "deploy", "-f", specPath, "--wait")
	}
	g := &gatewayUnderTest{}
	var events, reader, replacer string
	startGatewayWith(t, g, cliEnv, []gatewayToken{
		{"team-a-pager", "events", "gwteam-a-*", &events},
		{"team-a-dashboard", "read", "gwteam-a-*", &reader},
		{"team-a-replacer", "events,replace", "gwteam-a-*", &replacer},
	})
	before := map[string]int{mine: memberEventsIn(t, mine), theirs: memberEventsIn(t, theirs)}
	eventPath := func(n string) string { return "/v1/clusters/" + n + "/members/" + n + "-worker-1/events" }
	alert := func(n, event string) string {
		return `{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"clusterflow_cluster":"` + n + `","clusterflow_member":"` + n + `-worker-1","clusterflow_event":"` + event + `"}}]}`
	}
	for _, tc := range []struct {
		name, method, path, token, body string
		want                            int
		says                            string
	}{
		{"down on another team's cluster", "POST", eventPath(theirs), events, `{"event":"down"}`, 403, `token "team-a-pager" may not act on cluster ` + theirs},
		{"gone with an events token", "POST", eventPath(mine), events, `{"event":"gone"}`, 403, `token "team-a-pager" may not report members gone or unhealthy`},
		{"unhealthy with an events token", "POST", eventPath(mine), events, `{"event":"unhealthy"}`, 403, "may not report members gone or unhealthy"},
		{"gone on another team's cluster", "POST", eventPath(theirs), replacer, `{"event":"gone"}`, 403, "may not act on cluster " + theirs},
		{"read another team's cluster", "GET", "/v1/clusters/" + theirs, reader, "", 403, `token "team-a-dashboard" may not act on cluster ` + theirs},
	} {
		code, _, body := g.do(t, tc.method, tc.path, tc.token, "application/json", []byte(tc.body))
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); code != tc.want || err != nil || !strings.Contains(e.Error, tc.says) {
			t.Errorf("%s: %d %.300s, want %d saying %q", tc.name, code, body, tc.want, tc.says)
		}
	}
	// Alerts are answered one by one: each refused one says why.
	for _, tc := range []struct{ cluster, event, says string }{
		{theirs, "down", "may not act on cluster " + theirs},
		{mine, "gone", "may not report members gone or unhealthy"},
	} {
		code, _, body := g.do(t, "POST", "/v1/alertmanager", events, "application/json", []byte(alert(tc.cluster, tc.event)))
		var reply struct{ Results []struct{ Error string } }
		if err := json.Unmarshal([]byte(body), &reply); code != 200 || err != nil || len(reply.Results) != 1 || !strings.Contains(reply.Results[0].Error, tc.says) {
			t.Errorf("alert %s on %s: %d %.300s, want its result saying %q", tc.event, tc.cluster, code, body, tc.says)
		}
	}
	for n, was := range before {
		if now := memberEventsIn(t, n); now != was {
			t.Errorf("refused requests left %d member events in %s's history (%d before)", now, n, was)
		}
	}
	code, _, body := g.do(t, "GET", "/v1/clusters", reader, "", nil)
	var listed []struct{ Name string }
	if err := json.Unmarshal([]byte(body), &listed); code != 200 || err != nil || len(listed) != 1 || listed[0].Name != mine {
		t.Errorf("GET /v1/clusters with a team-a token: %d %.300s, want only %s", code, body, mine)
	}
	// Within its clusters and scopes, a token works.
	if code, _, body := g.do(t, "POST", eventPath(mine), events, "application/json", []byte(`{"event":"down"}`)); code != 200 || !strings.Contains(body, `"to":"down"`) {
		t.Errorf("down on its own cluster: %d %.300s", code, body)
	}
	if code, _, body := g.do(t, "POST", eventPath(mine), replacer, "application/json", []byte(`{"event":"gone"}`)); code != 200 || !strings.Contains(body, `"to":"replacing"`) {
		t.Errorf("gone with a replace token: %d %.300s", code, body)
	}
	for _, n := range []string{mine, theirs} {
		mustSucceed(t, "delete", n, "--wait")
	}
}

// TestTheGatewayLimitsEachTokensRate answers 429 with Retry-After past a token's burst.
func TestTheGatewayLimitsEachTokensRate(t *testing.T) {
	t.Parallel()
	guard(t)
	// One token a 100 s: a busy machine cannot slow the three requests enough to refill it.
	g := startGateway(t, cliEnv, "--rate", "0.01", "--burst", "2")
	for i := range 2 {
		if code, _, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil); code != 200 {
			t.Fatalf("request %d within the burst: %d %s", i+1, code, body)
		}
	}
	code, header, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil)
	if code != 429 || header.Get("Retry-After") == "" || !strings.Contains(body, "retry later") {
		t.Errorf("past the burst: %d, Retry-After %q, %s", code, header.Get("Retry-After"), body)
	}
	// Another token has its own budget.
	if code, _, body := g.do(t, "GET", "/v1/clusters", g.eventsRO, "", nil); code != 200 {
		t.Errorf("another token: %d %s", code, body)
	}

	// A notification from Alertmanager counts its alerts, not one request: 3 alerts of a
	// burst of 4 pass, 2 more are past it, and 5 at once never fit.
	a := startGateway(t, cliEnv, "--rate", "0.01", "--burst", "4")
	notification := func(alerts int) []byte {
		var list []string
		for i := range alerts {
			list = append(list, fmt.Sprintf(`{"status":"firing","labels":{"clusterflow_cluster":"no-such-cluster","clusterflow_member":"no-such-cluster-w-%d"}}`, i))
		}
		return []byte(`{"version":"4","status":"firing","alerts":[` + strings.Join(list, ",") + `]}`)
	}
	if code, _, body := a.do(t, "POST", "/v1/alertmanager", a.events, "application/json", notification(5)); code != 429 || !strings.Contains(body, "max_alerts to at most 4") {
		t.Errorf("5 alerts at once against a burst of 4: %d %s", code, body)
	}
	if code, _, body := a.do(t, "POST", "/v1/alertmanager", a.events, "application/json", notification(3)); code != 200 {
		t.Errorf("3 alerts within a burst of 4: %d %s", code, body)
	}
	code, header, body = a.do(t, "POST", "/v1/alertmanager", a.events, "application/json", notification(2))
	if code != 429 || header.Get("Retry-After") == "" || !strings.Contains(body, "alerts a second") {
		t.Errorf("2 alerts past the burst: %d, Retry-After %q, %s", code, header.Get("Retry-After"), body)
	}
}

// The gateway answers only requests that name it by address, as localhost or by a name
// it is told (--allowed-hosts): a web page that rebinds its own domain to the gateway's
// address sends its domain as Host, and is refused before anything else is read.
func TestTheGatewayAnswersOnlyItsOwnNames(t *testing.T) {
	t.Parallel()
	guard(t)
	g := startGateway(t, cliEnv, "--allowed-hosts", "gateway.example.test")
	for _, host := range []string{"", "localhost:8088", "gateway.example.test", "GATEWAY.example.test:443"} {
		if code, _, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil, "Host", host); code != 200 {
			t.Errorf("Host %q: %d %s", host, code, body)
		}
	}
	for _, host := range []string{"rebound.example.com", "rebound.example.com:8088", "gateway.example.test.evil"} {
		code, _, body := g.do(t, "GET", "/v1/clusters", g.read, "", nil, "Host", host)
		if code != 403 || !strings.Contains(body, "--allowed-hosts") {
			t.Errorf("Host %q: %d %s; want 403 naming --allowed-hosts", host, code, body)
		}
	}
}

// memberEventsIn counts the updates and signals in a cluster's history: what a member
// event leaves there.
func memberEventsIn(t *testing.T, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := testenv.WalkHistories(ctx, server.Client, workflows.ClusterWorkflowID(name), func(_ string, _ int, h *historypb.History) error {
		for _, e := range h.Events {
			switch e.EventType {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTheGatewayAnswers503WhileTemporalIsDown stops the server under a running gateway:
// an event is answered 503 with Retry-After, and once the server is back the retry
// succeeds, and the member's history holds the event once.
//
// It runs before the parallel tests: it starts `dev`, whose embedded server must not race
// another for ports (see TestDevRunsTheExampleAndKeepsStateAcrossRestarts).
func TestTheGatewayAnswers503WhileTemporalIsDown(t *testing.T) {
	guard(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	addr := freeAddress(t)
	args := []string{"dev", "--no-ui", "--no-gateway", "--db", filepath.Join(dir, "dev.db"), "--data", data, "--address", addr}
	dev := startDev(t, dir, "dev-1", args)
	if err := dev.WaitFor("Ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEMPORAL_ADDRESS=" + addr}
	n := "gwdown"
	specPath, _ := writeCluster(t, healthSpec(n, "1h"))
	if res := run(t, env, "deploy", "-f", specPath, "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	g := startGateway(t, env, "--temporal-timeout", "3s")
	if code, _, _ := g.do(t, "GET", "/v1/clusters/"+n, g.read, "", nil); code != 200 {
		t.Fatalf("GET before the stop: %d", code)
	}

	if code, err := dev.Signal(syscall.SIGTERM, time.Minute); err != nil || code != 0 {
		t.Fatalf("dev did not stop: %d %v", code, err)
	}
	code, header, body := g.do(t, "POST", "/v1/clusters/"+n+"/members/"+n+"-worker-1/events", g.events, "application/json", []byte(`{"event":"down","reason":"while down"}`))
	if code != 503 || header.Get("Retry-After") == "" || !strings.Contains(body, "Temporal did not answer") {
		t.Errorf("event while Temporal is down: %d, Retry-After %q, %s", code, header.Get("Retry-After"), body)
	}

	// An Alertmanager notification: once one alert finds Temporal down, the rest are not
	// tried (each would wait out the timeout again), and all come back with the 503.
	var alerts []string
	for _, m := range []string{"worker-0", "worker-1", "controller-0"} {
		alerts = append(alerts, fmt.Sprintf(`{"status":"firing","labels":{"clusterflow_cluster":%q,"clusterflow_member":%q}}`, n, n+"-"+m))
	}
	code, header, body = g.do(t, "POST", "/v1/alertmanager", g.events, "application/json",
		[]byte(`{"version":"4","status":"firing","alerts":[`+strings.Join(alerts, ",")+`]}`))
	var reply struct {
		Results []struct{ Member, Error string }
	}
	if err := json.Unmarshal([]byte(body), &reply); code != 503 || header.Get("Retry-After") == "" || err != nil || len(reply.Results) != 3 ||
		!strings.Contains(reply.Results[0].Error, "Temporal did not answer") ||
		!strings.HasPrefix(reply.Results[1].Error, "not sent:") || !strings.HasPrefix(reply.Results[2].Error, "not sent:") {
		t.Errorf("a notification while Temporal is down: %d, Retry-After %q, %s", code, header.Get("Retry-After"), body)
	}

	dev = startDev(t, dir, "dev-2", args)
	if err := dev.WaitFor("Ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	var res workflows.MemberEventResult
	waitFor(t, "the retried event to be taken", func() bool {
		code, body := g.postEvent(t, n, n+"-worker-1", `{"event":"down","reason":"while down"}`)
		return code == 200 && json.Unmarshal([]byte(body), &res) == nil
	})
	if res.From != workflows.MemberReady || res.To != workflows.MemberDown {
		t.Errorf("the retry: %+v, want ready → down", res)
	}
	out := run(t, env, "status", n, "-o", "json")
	var status workflows.ClusterStatus
	if err := json.Unmarshal([]byte(out.Stdout), &status); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if m := status.Member(n + "-worker-1"); m == nil || m.State != workflows.MemberDown || m.Health == nil || len(m.Health.Transitions) != 1 {
		t.Errorf("worker-1 should be down with the event once: %+v", m)
	}
	if res := run(t, env, "delete", n, "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// A down reported with a token that may not replace (events only) takes the member down,
// and no further: its replaceAfter passes without a replacement. Reported at the same
// moment of another member with a token that may replace, that one is replaced after
// replaceAfter, which shows the time has passed. An up brings the first one back.
func TestAnEventsOnlyDownNeverReplacesAMember(t *testing.T) {
	t.Parallel()
	guard(t)
	name := "gwwatch"
	// Two members down at once are within maxUnavailable: no meltdown guard holds either.
	specPath, _ := writeCluster(t, `
name: gwwatch
roles:
  - {name: worker, members: 3, startscript: trace.sh, env: {TRACE: TRACE_FILE}, replaceAfter: 3s, maxUnavailable: "2"}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := &gatewayUnderTest{}
	var watcher, replacer string
	startGatewayWith(t, g, cliEnv, []gatewayToken{{"watcher", "events", name, &watcher}, {"replacer", "events,replace", name, &replacer}})
	report := func(token, member, event string) {
		t.Helper()
		code, _, body := g.do(t, "POST", "/v1/clusters/"+name+"/members/"+member+"/events", token, "application/json", []byte(`{"event":"`+event+`"}`))
		if code != 200 || !strings.Contains(body, `"to":"`) {
			t.Fatalf("%s %s: %d %s", event, member, code, body)
		}
	}
	report(watcher, name+"-worker-0", "down")
	report(replacer, name+"-worker-1", "down")
	waitUpTo(t, time.Minute, "the member reported down with a replace token replaced", func() bool {
		st := statusJSON(t, name)
		for _, m := range st.Role("worker").Members {
			if m.Replaces == name+"-worker-1" && m.State == workflows.MemberReady {
				return true
			}
		}
		return false
	})
	after := statusJSON(t, name)
	for _, m := range after.Role("worker").Members {
		switch {
		case m.Name == name+"-worker-0" && m.State != workflows.MemberDown:
			t.Errorf("%s, reported down by an events-only token: %s; want down still", m.Name, m.State)
		case m.Replaces == name+"-worker-0":
			t.Errorf("%s replaces %s, which only an events-only token reported down", m.Name, m.Replaces)
		}
	}
	report(watcher, name+"-worker-0", "up")
	st := statusJSON(t, name)
	if m := st.Role("worker").Members[0]; m.Name != name+"-worker-0" || m.State != workflows.MemberReady {
		t.Errorf("after up: %s %s", m.Name, m.State)
	}
	mustSucceed(t, "delete", name, "--wait")
}
