// Command gatewayload sends member events as fast as it may, with a bounded count and
// concurrency, over the health gateway's HTTP API or through the Go client in this process,
// and prints the rate and the latency from request to answer.
//
//	gatewayload -mode http -url http://127.0.0.1:8088 -token-file F -cluster c -members 20 -n 2000 -c 16
//	TEMPORAL_ADDRESS=… gatewayload -mode client -cluster c -members 20 -n 2000 -c 16
//
// Event i goes to member i mod members, alternately down and up, so each is a transition.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func main() {
	mode := flag.String("mode", "http", "http (through the gateway) or client (the Go client in this process)")
	url := flag.String("url", "", "the gateway's URL, for -mode http")
	tokenFile := flag.String("token-file", "", "file holding the gateway token, for -mode http")
	cluster := flag.String("cluster", "", "the cluster")
	role := flag.String("role", "worker", "the role whose members get the events")
	members := flag.Int("members", 10, "members 0…N-1 of the role get the events")
	n := flag.Int("n", 1000, "events to send (at most 100,000)")
	c := flag.Int("c", 8, "events in flight at once (at most 256)")
	flag.Parse()
	if *n < 1 || *n > 100_000 || *c < 1 || *c > 256 || *members < 1 {
		fail(fmt.Errorf("-n must be 1…100000, -c 1…256, -members at least 1"))
	}
	send, err := sender(*mode, *url, *tokenFile, *cluster)
	if err != nil {
		fail(err)
	}
	latencies := make([]time.Duration, *n)
	var next, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *n {
					return
				}
				event := workflows.HealthDown
				if (i / *members)%2 == 1 {
					event = workflows.HealthUp
				}
				member := fmt.Sprintf("%s-%s-%d", *cluster, *role, i%*members)
				t0 := time.Now()
				if err := send(member, event); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				latencies[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	fmt.Printf("%s: %d events, %d in flight, %.0f per second, p50 %s, p99 %s, %d failed\n", *mode, *n, *c,
		float64(*n)/elapsed.Seconds(), pct(0.5).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		fail(fmt.Errorf("first failure: %w", err))
	}
}

func sender(mode, url, tokenFile, cluster string) (func(member string, event workflows.HealthEvent) error, error) {
	switch mode {
	case "http":
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		auth := "Bearer " + strings.TrimSpace(string(token))
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		return func(member string, event workflows.HealthEvent) error {
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/clusters/%s/members/%s/events", url, cluster, member),
				bytes.NewReader(fmt.Appendf(nil, `{"event":%q,"source":"bench"}`, event)))
			req.Header.Set("Authorization", auth)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			return nil
		}, nil
	case "client":
		c, err := testenv.Dial(os.Getenv("TEMPORAL_ADDRESS"))
		if err != nil {
			return nil, err
		}
		st := starter.New(c, "")
		return func(member string, event workflows.HealthEvent) error {
			_, err := st.ReportMemberEvent(context.Background(), cluster, workflows.MemberEvent{Member: member, Event: event, Source: "bench"})
			return err
		}, nil
	}
	return nil, fmt.Errorf("-mode %q: want http or client", mode)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gatewayload:", err)
	os.Exit(1)
}
