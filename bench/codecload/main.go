// Command codecload times the codec server's decode of a real history, as the Web UI asks
// for it: the payloads of a workflow's first N events, sent one request per event (the UI
// decodes the events it shows) and all in one request, each way R times. The history is the
// first of the workflows whose ID contains -workflow that has N events with payloads (a
// role's child of a wide cluster has one per script run).
//
//	TEMPORAL_ADDRESS=… codecload -url http://127.0.0.1:8089 -origin http://127.0.0.1:8233 -workflow wide -events 100 -rounds 20
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
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/clusterflow/clusterflow/starter"
)

func main() {
	url := flag.String("url", "", "the codec server's URL")
	origin := flag.String("origin", "", "the Origin to send (the Web UI's)")
	workflowID := flag.String("workflow", "", "decode the history of a workflow whose ID contains this")
	events := flag.Int("events", 100, "decode the first N events (at most 10,000)")
	rounds := flag.Int("rounds", 20, "times to decode them each way (at most 1,000)")
	flag.Parse()
	if *url == "" || *workflowID == "" || *events < 1 || *events > 10_000 || *rounds < 1 || *rounds > 1000 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*url, *origin, *workflowID, *events, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "codecload:", err)
		os.Exit(1)
	}
}

func run(url, origin, idPart string, n, rounds int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	co, _, err := starter.ClientOptions(starter.ConnectOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.DialContext(ctx, co)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1000})
	if err != nil {
		return err
	}
	var perEvent [][]*commonpb.Payload
	workflowID := ""
	for _, e := range resp.Executions {
		if workflowID = e.GetExecution().GetWorkflowId(); !strings.Contains(workflowID, idPart) {
			continue
		}
		perEvent = perEvent[:0]
		it := c.GetWorkflowHistory(ctx, workflowID, e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() && len(perEvent) < n {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			if ps := payloadsOf(ev); len(ps) > 0 {
				perEvent = append(perEvent, ps)
			}
		}
		if len(perEvent) == n {
			break
		}
	}
	if len(perEvent) < n {
		return fmt.Errorf("no workflow whose ID contains %q has %d events with payloads", idPart, n)
	}
	all := slices.Concat(perEvent...)
	bytesIn := 0
	for _, p := range all {
		bytesIn += proto.Size(p)
	}
	var oneByOne, together []time.Duration
	for range rounds {
		start := time.Now()
		for _, ps := range perEvent {
			if err := decode(url, origin, ps); err != nil {
				return err
			}
		}
		oneByOne = append(oneByOne, time.Since(start))
		start = time.Now()
		if err := decode(url, origin, all); err != nil {
			return err
		}
		together = append(together, time.Since(start))
	}
	fmt.Printf("%s: %d events, %d payloads, %d KiB encrypted; median of %d rounds\n", workflowID, n, len(all), bytesIn>>10, rounds)
	fmt.Printf("  one request per event:  %7.2f ms for the %d events (%.2f ms a request)\n", ms(median(oneByOne)), n, ms(median(oneByOne))/float64(n))
	fmt.Printf("  one request for all:    %7.2f ms\n", ms(median(together)))
	return nil
}

// payloadsOf finds every payload in an event, wherever the event type keeps them.
func payloadsOf(ev *historypb.HistoryEvent) []*commonpb.Payload {
	var out []*commonpb.Payload
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if p, ok := m.Interface().(*commonpb.Payload); ok {
			out = append(out, p)
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { walk(mv.Message()); return true })
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap() && !fd.IsList():
				walk(v.Message())
			}
			return true
		})
	}
	walk(ev.ProtoReflect())
	return out
}

func decode(url, origin string, ps []*commonpb.Payload) error {
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url+"/default/decode", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("decode: %s: %s", resp.Status, out)
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
