package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// TestAlertmanagerReportsMembersThroughTheGateway runs a real Prometheus Alertmanager with
// the gateway as its webhook receiver. A group of firing alerts about two members moves
// both down, and one about an unknown member is answered without breaking the others; the
// repeats Alertmanager sends change nothing; resolving the alerts brings both back up.
func TestAlertmanagerReportsMembersThroughTheGateway(t *testing.T) {
	t.Parallel()
	guard(t)
	bin, err := testenv.Alertmanager()
	if err != nil {
		t.Fatal(err)
	}
	n := "gwalerts"
	specPath, _ := writeCluster(t, healthSpec(n, "1h"))
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	g := startGateway(t, cliEnv)

	dir := t.TempDir()
	credentials := filepath.Join(dir, "clusterflow-token")
	if err := os.WriteFile(credentials, []byte(g.events), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`
route:
  receiver: clusterflow
  group_by: [clusterflow_cluster]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 2s
receivers:
  - name: clusterflow
    webhook_configs:
      - url: %s/v1/alertmanager
        send_resolved: true
        http_config: {authorization: {credentials_file: %s}}
`, g.url, credentials)
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	amAddr := freeAddress(t)
	am, err := testenv.StartProgram(bin, dir, dir, "alertmanager", nil,
		"--config.file", filepath.Join(dir, "alertmanager.yml"), "--storage.path", filepath.Join(dir, "data"),
		"--web.listen-address", amAddr, "--cluster.listen-address", "") // no gossip port: one instance
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(am.Stop)
	client := &http.Client{Timeout: 10 * time.Second}
	waitFor(t, "Alertmanager to answer", func() bool {
		resp, err := client.Get("http://" + amAddr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	alerts := func(endsAt time.Time, members ...string) {
		t.Helper()
		var body []map[string]any
		for _, m := range members {
			a := map[string]any{
				"labels":      map[string]string{"alertname": "NodeDown", "clusterflow_cluster": n, "clusterflow_member": m},
				"annotations": map[string]string{"summary": "node exporter unreachable"},
			}
			if !endsAt.IsZero() {
				a["endsAt"] = endsAt.UTC().Format(time.RFC3339Nano)
			}
			body = append(body, a)
		}
		data, _ := json.Marshal(body)
		resp, err := client.Post("http://"+amAddr+"/api/v2/alerts", "application/json", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("post alerts to Alertmanager: %d", resp.StatusCode)
		}
	}
	states := func() string {
		s := statusJSON(t, n)
		return fmt.Sprint(s.Member(n+"-worker-1").State, " ", s.Member(n+"-worker-0").State)
	}
	alerts(time.Time{}, n+"-worker-1", n+"-worker-0", n+"-worker-9")
	waitFor(t, "both alerted workers down", func() bool { return states() == "down down" })
	// Alertmanager repeats the firing group every 2 s; wait for two repeats.
	notifications := regexp.MustCompile(`clusterflow_gateway_requests_total\{code="200",route="POST /v1/alertmanager"\} (\d+)`)
	sent := func() int {
		_, _, body := g.do(t, "GET", "/metrics", g.read, "", nil)
		m := notifications.FindStringSubmatch(body)
		if m == nil {
			return 0
		}
		count, _ := strconv.Atoi(m[1])
		return count
	}
	waitFor(t, "Alertmanager to repeat the notification", func() bool { return sent() >= 3 })
	// One transition each, however many notifications came.
	repeated := statusJSON(t, n)
	for _, name := range []string{n + "-worker-1", n + "-worker-0"} {
		m := repeated.Member(name)
		if m.State != "down" || m.Health == nil || len(m.Health.Transitions) != 1 || m.Health.Transitions[0].Source != "alertmanager" ||
			m.Health.Transitions[0].Reason != "node exporter unreachable" {
			t.Errorf("%s after repeats: %s %+v, want down with one transition from alertmanager", name, m.State, m.Health)
		}
	}
	_, _, metrics := g.do(t, "GET", "/metrics", g.read, "", nil)
	for _, want := range []string{`clusterflow_gateway_events_total{outcome="changed"} 2`, `clusterflow_gateway_events_total{outcome="refused"}`} {
		if !bytes.Contains([]byte(metrics), []byte(want)) {
			t.Errorf("metrics lack %q: the repeats should change nothing and the unknown member be refused\n%s", want, metrics)
		}
	}
	if regexp.MustCompile(`code="[45]\d\d",route="POST /v1/alertmanager"`).MatchString(metrics) {
		t.Errorf("a notification was refused:\n%s", metrics)
	}

	alerts(time.Now().Add(-time.Second), n+"-worker-1", n+"-worker-0", n+"-worker-9")
	waitFor(t, "both workers up again", func() bool { return states() == "ready ready" })
	final := statusJSON(t, n)
	if final.Member(n+"-worker-9") != nil {
		t.Error("the unknown member's alert made a member")
	}
	if _, err := am.Signal(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Error(err)
	}
	mustSucceed(t, "delete", n, "--wait")
}
