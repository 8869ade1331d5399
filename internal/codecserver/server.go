// Package codecserver serves clusterflow's codec over HTTP, for Temporal's Web UI and CLI.
package codecserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/session"
)

// maxRequest bounds a request's body: a workflow task's payloads fit in 4 MiB, and the Web
// UI sends one event's at a time.
const maxRequest = 8 << 20

// Options configure the codec server.
type Options struct {
	// AllowedOrigins are the Web UIs' origins (scheme://host:port) that may call it from a
	// browser; a request from any other origin is refused. Never "*".
	AllowedOrigins []string
	// Tokens, when set, are required as "Authorization: Bearer TOKEN" with scope codec (the
	// gateway's token file format). Without them anyone who reaches the address decodes.
	Tokens gateway.Tokens
	// Session, when set, is what every request must carry too: the Web UI's session
	// (dev's), sent by the browser with the UI's requests, and by no one else who merely
	// reaches the address.
	Session *session.Guard
	Logger  *zap.Logger
}

// Check refuses options that would serve more than asked.
func (o Options) Check() error {
	for _, origin := range o.AllowedOrigins {
		if origin == "*" || !strings.Contains(origin, "://") || strings.HasSuffix(origin, "/") {
			return fmt.Errorf("--allowed-origins: %q is not an origin: write scheme://host[:port], as the browser sends it (never *)", origin)
		}
	}
	for _, t := range o.Tokens {
		if t.Allows(gateway.ScopeCodec) && !slices.Equal(t.Clusters, gateway.AllClusters) {
			return fmt.Errorf("--tokens-file: token %q has scope codec for clusters %s, but a codec reads every cluster's payloads: give it clusters *", t.Name, strings.Join(t.Clusters, ","))
		}
	}
	return nil
}

// Handler serves POST /{namespace}/encode and /{namespace}/decode (or /encode, /decode) as
// Temporal's Web UI and CLI expect (--codec-endpoint), for these keys only.
func Handler(keys *codec.Keys, opts Options) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(codec.New(keys))
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		serve(rec, r, inner, opts)
		// Only the route and the outcome: never a payload.
		log.Info("Codec request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.String("origin", r.Header.Get("Origin")), zap.Int("status", rec.status), zap.Duration("duration", time.Since(start)))
	})
}

func serve(w http.ResponseWriter, r *http.Request, inner http.Handler, opts Options) {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !slices.Contains(opts.AllowedOrigins, origin) {
			http.Error(w, fmt.Sprintf("origin %q may not use this codec server (see --allowed-origins)", origin), http.StatusForbidden)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "POST")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if r.Method != http.MethodPost || (!strings.HasSuffix(r.URL.Path, "/encode") && !strings.HasSuffix(r.URL.Path, "/decode")) {
		http.Error(w, "POST /{namespace}/encode or /{namespace}/decode", http.StatusNotFound)
		return
	}
	if opts.Session != nil && !opts.Session.Allows(r) {
		opts.Session.Refuse(w)
		return
	}
	if opts.Tokens != nil {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok, known := opts.Tokens.Match(strings.TrimSpace(secret))
		switch {
		case !ok || !known:
			w.Header().Set("WWW-Authenticate", `Bearer realm="clusterflow-codec"`)
			http.Error(w, "Authorization: send 'Authorization: Bearer TOKEN' with a token of scope codec", http.StatusUnauthorized)
			return
		case !tok.Allows(gateway.ScopeCodec):
			http.Error(w, fmt.Sprintf("token %q may not use the codec (it needs scope codec)", tok.Name), http.StatusForbidden)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequest)
	inner.ServeHTTP(w, r)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
