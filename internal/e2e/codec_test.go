package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// testCodec hides each payload inside another, reversed, as an encrypting codec would hide
// it: what the server stores is unreadable without the codec.
type testCodec struct{}

const testCodecEncoding = "binary/clusterflow-test-codec"

func (testCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		reversed := make([]byte, len(data))
		for j, b := range data {
			reversed[len(data)-1-j] = b
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(testCodecEncoding)}, Data: reversed}
	}
	return out, nil
}

func (testCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != testCodecEncoding {
			out[i] = p
			continue
		}
		data := make([]byte, len(p.Data))
		for j, b := range p.Data {
			data[len(p.Data)-1-j] = b
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(data, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// A codec the operator configures through Temporal's environment (TEMPORAL_CODEC_ENDPOINT)
// is honoured by the CLI, the worker and the agent: the cluster's input, its scripts'
// results and its status all pass through it, so the server holds only encoded payloads;
// status and a script's last line still read back in plain text.
func TestARemoteCodecFromTheEnvironmentIsHonoured(t *testing.T) {
	t.Parallel()
	guard(t)
	codec := httptest.NewServer(converter.NewPayloadCodecHTTPHandler(testCodec{}))
	t.Cleanup(codec.Close)
	s := newServerStack(t)
	s.env = append(s.env, "TEMPORAL_CODEC_ENDPOINT="+codec.URL)
	s.startWorker()
	dir := t.TempDir()
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"plain-marker $CLUSTERFLOW_MEMBER\"\n[ \"$1\" != --configure ] || sleep 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(specPath, []byte("name: coded\nroles:\n  - {name: w, members: 2, startscript: "+script+", env: {MARK: plain-env-marker}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.cli("deploy", "-f", specPath); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	// A script's last line comes back through the codec while it runs.
	waitFor(t, "a running script's last line in status", func() bool {
		res := s.cli("status", "coded", "-o", "json")
		return res.Code == 0 && strings.Contains(res.Stdout, "plain-marker coded-w-")
	})
	waitFor(t, "the cluster ready", func() bool { return s.status("coded").Phase == workflows.PhaseReady })

	// Without the codec, the history holds no plain payload: every payload is encoded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, err := testenv.ClientOptions(s.address)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.DialContext(ctx, co)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	encoded, plain := 0, 0
	check := func(ps ...*commonpb.Payload) {
		for _, p := range ps {
			if string(p.GetMetadata()[converter.MetadataEncoding]) == testCodecEncoding {
				encoded++
			} else {
				plain++
				t.Errorf("a payload the codec did not encode: %s %.100s", p.GetMetadata()[converter.MetadataEncoding], p.GetData())
			}
		}
	}
	for _, id := range []string{workflows.ClusterWorkflowID("coded")} {
		it := raw.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				check(a.GetInput().GetPayloads()...)
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				check(a.GetInput().GetPayloads()...)
			}
			if a := ev.GetChildWorkflowExecutionCompletedEventAttributes(); a != nil {
				check(a.GetResult().GetPayloads()...)
			}
		}
	}
	if encoded == 0 || plain > 0 {
		t.Errorf("%d payloads encoded, %d plain", encoded, plain)
	}
	if res := s.cli("delete", "coded", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}
