package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

// prometheus is a Prometheus server a test started, scraping the suite's worker.
type prometheus struct {
	url    string
	client *http.Client
}

// startPrometheus starts Debian's Prometheus, scraping the suite's worker every second
// with rules loaded, and waits until it has scraped it.
func startPrometheus(t *testing.T, rules string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("Prometheus is not installed (Debian's prometheus package; .ci/deps installs it): %v", err)
	}
	target := strings.TrimSuffix(strings.TrimPrefix(metricsURL, "http://"), "/metrics")
	dir := t.TempDir()
	config := fmt.Sprintf(`
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: clusterflow
    static_configs: [{targets: [%q]}]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	address := freeAddress(t)
	p, err := testenv.StartProgram(bin, dir, dir, "prometheus", nil,
		"--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	prom := &prometheus{url: "http://" + address, client: &http.Client{Timeout: 10 * time.Second}}
	waitFor(t, "Prometheus to scrape the worker", func() bool {
		var up []sample
		err := prom.get("/api/v1/query?query=up", &up)
		return err == nil && len(up) == 1 && up[0].Value == 1
	})
	return prom
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string
	Value  float64
}

// query evaluates expr now; an expression Prometheus refuses fails the test.
func (p *prometheus) query(t *testing.T, expr string) []sample {
	t.Helper()
	var out []sample
	if err := p.get("/api/v1/query?query="+url.QueryEscape(expr), &out); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return out
}

// get asks Prometheus's API for an instant vector.
func (p *prometheus) get(path string, into *[]sample) error {
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.getJSON(path, &body); err != nil {
		return err
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", body.Status, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return fmt.Errorf("result type %s, want vector", body.Data.ResultType)
	}
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("value %v: %w", r.Value, err)
		}
		*into = append(*into, sample{Metric: r.Metric, Value: v})
	}
	return nil
}

func (p *prometheus) getJSON(path string, into any) error {
	resp, err := p.client.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

// rulesEvaluated counts the loaded rules that have been evaluated without error; a rule
// that failed to evaluate fails the test.
func (p *prometheus) rulesEvaluated(t *testing.T) int {
	t.Helper()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := p.getJSON("/api/v1/rules", &body); err != nil {
		t.Fatalf("rules: %v", err)
	}
	ok := 0
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			switch r.Health {
			case "ok":
				ok++
			case "err":
				t.Fatalf("rule %s does not evaluate: %s", r.Name, r.LastError)
			}
		}
	}
	return ok
}
