package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/clusterflow/clusterflow/internal/apperr"
)

// Options configure a gateway.
type Options struct {
	// Tokens are the accepted tokens; with none, InsecureNoAuth must be set.
	Tokens Tokens
	// InsecureNoAuth serves without tokens, on a loopback address only.
	InsecureNoAuth bool
	// AllowedOrigins may call from a browser (CORS); none by default.
	AllowedOrigins []string
	// AllowedHosts are the names, besides IP literals and localhost, that a request may
	// give as its Host: a web page that rebinds its own domain to the gateway's address
	// (DNS rebinding) sends its domain, and is refused.
	AllowedHosts []string
	// Labels name the member in an alert (DefaultLabels when empty).
	Labels Labels
	// Rate and Burst bound what each token may report or ask a second: a request counts
	// one, a notification from Alertmanager one for each of its alerts.
	Rate  float64
	Burst int
	// TemporalTimeout bounds each call to Temporal; past it the answer is 503.
	TemporalTimeout time.Duration
	Logger          *zap.Logger
}

// Defaults for what Options leave at zero; the CLI's flags start from them.
const (
	DefaultRate = 50
	// DefaultBurst lets one notification of the most alerts allowed pass at once.
	DefaultBurst           = MaxAlerts
	DefaultTemporalTimeout = 10 * time.Second
)

// maxBody is the largest request body accepted.
const maxBody = 1 << 20

// retryAfter is what a 503 asks the caller to wait, in seconds.
const retryAfter = "5"

// Gateway is the HTTP handler.
type Gateway struct {
	opts     Options
	clusters Clusters
	log      *zap.Logger
	mux      *http.ServeMux
	metrics  *metrics

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New checks the options and builds the gateway's handler.
func New(opts Options, clusters Clusters) (*Gateway, error) {
	if len(opts.Tokens) == 0 && !opts.InsecureNoAuth {
		return nil, apperr.Errorf(apperr.Invalid, "--tokens-file: the gateway needs tokens (make one with `clusterflow gateway token NAME`), or --insecure-no-auth on a loopback address")
	}
	if slices.Contains(opts.AllowedOrigins, "*") {
		return nil, apperr.Errorf(apperr.Invalid, "--allowed-origins: '*' would let any web page call the gateway; name the origins, e.g. https://ops.example.com")
	}
	if opts.Labels == (Labels{}) {
		opts.Labels = DefaultLabels
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.TemporalTimeout <= 0 {
		opts.TemporalTimeout = DefaultTemporalTimeout
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	g := &Gateway{opts: opts, clusters: clusters, log: opts.Logger, limiters: map[string]*rate.Limiter{}, metrics: newMetrics()}
	g.routes()
	return g, nil
}

// ServeHTTP logs and counts every request, and answers CORS before anything else.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	id := uuid.NewString()
	rec.Header().Set("X-Request-Id", id)
	switch {
	case !g.allowedHost(r.Host):
		writeError(rec, apperr.Errorf(apperr.Forbidden, "Host %q is not a name of this gateway: call it by address, or name it in --allowed-hosts", r.Host))
	case g.cors(rec, r):
		g.mux.ServeHTTP(rec, r)
	}
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	g.metrics.requests.WithLabelValues(route, fmt.Sprint(rec.status)).Inc()
	g.log.Info("Request", zap.String("id", id), zap.String("token", rec.token), zap.String("method", r.Method),
		zap.String("route", route), zap.Int("status", rec.status), zap.Duration("duration", time.Since(start)))
}

// allowedHost says whether a request's Host header names this gateway: an IP literal,
// localhost, or one of AllowedHosts.
func (g *Gateway) allowedHost(hostHeader string) bool {
	name, _, err := net.SplitHostPort(hostHeader)
	if err != nil {
		name = hostHeader
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	return name == "localhost" || net.ParseIP(strings.Trim(name, "[]")) != nil ||
		slices.ContainsFunc(g.opts.AllowedHosts, func(h string) bool { return strings.EqualFold(h, name) })
}

// cors answers preflights and marks allowed origins; it reports whether to go on.
func (g *Gateway) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	allowed := origin != "" && slices.Contains(g.opts.AllowedOrigins, origin)
	if allowed {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return true
	}
	if !allowed {
		writeError(w, apperr.Errorf(apperr.Forbidden, "origin %q may not call this gateway (see --allowed-origins)", origin))
		return false
	}
	w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
	w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return false
}

// recorder keeps the status and the token's name for the request's log line.
type recorder struct {
	http.ResponseWriter
	status int
	token  string
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Serve serves h on ln until ctx ends, then finishes the requests in flight. With a
// certificate and key it serves TLS.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, certFile, keyFile string) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan error, 1)
	go func() {
		if certFile != "" {
			done <- srv.ServeTLS(ln, certFile, keyFile)
		} else {
			done <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// IsLoopback says whether a listen address binds loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
