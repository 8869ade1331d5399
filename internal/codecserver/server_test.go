package codecserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/gateway"
)

const secret = "hunter2-secret-value"

func codecRequest(t *testing.T, h http.Handler, path, origin, token string, payloads ...*commonpb.Payload) *httptest.ResponseRecorder {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestTheCodecServerDecodesForItsOriginAndTokensOnly(t *testing.T) {
	line, _ := codec.NewKeyLine("a")
	keys, err := codec.ParseKeys([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := codec.New(keys).Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + secret + `"`)}})
	const ui = "http://127.0.0.1:8233"
	h := Handler(keys, Options{AllowedOrigins: []string{ui}})

	w := codecRequest(t, h, "/default/decode", ui, "", enc...)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Imh1bnRlcjItc2VjcmV0LXZhbHVlIg==") || w.Header().Get("Access-Control-Allow-Origin") != ui {
		t.Errorf("the UI's origin: %d %s %v", w.Code, w.Body, w.Header())
	}
	w = codecRequest(t, h, "/default/decode", "http://evil.example", "", enc...)
	if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "Imh1bnRlcjI") || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign origin: %d %s", w.Code, w.Body)
	}
	pre := httptest.NewRequest(http.MethodOptions, "/default/decode", nil)
	pre.Header.Set("Origin", ui)
	pre.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, pre)
	if rec.Code != http.StatusNoContent || !strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "X-Namespace") {
		t.Errorf("preflight: %d %v", rec.Code, rec.Header())
	}

	codecTok := gateway.TokenFor("ui", []gateway.Scope{gateway.ScopeCodec}, gateway.AllClusters, "codec-secret")
	readTok := gateway.TokenFor("reader", []gateway.Scope{gateway.ScopeRead}, gateway.AllClusters, "read-secret")
	h = Handler(keys, Options{AllowedOrigins: []string{ui}, Tokens: gateway.Tokens{codecTok, readTok}})
	for token, want := range map[string]int{"": 401, "wrong": 401, "read-secret": 403, "codec-secret": 200} {
		if w := codecRequest(t, h, "/default/decode", "", token, enc...); w.Code != want {
			t.Errorf("token %q: %d, want %d (%s)", token, w.Code, want, w.Body)
		}
	}
	scoped := gateway.TokenFor("team", []gateway.Scope{gateway.ScopeCodec}, []string{"team-a-*"}, "x")
	if err := (Options{Tokens: gateway.Tokens{scoped}}).Check(); err == nil {
		t.Error("a codec token scoped to some clusters was taken")
	}
	if err := (Options{AllowedOrigins: []string{"*"}}).Check(); err == nil {
		t.Error("origin * was taken")
	}
}
