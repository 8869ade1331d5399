package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiopts "github.com/temporalio/ui-server/v2/server/server_options"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/session"
)

// UI is a running Temporal Web UI.
type UI struct {
	server *uiserver.Server
	front  *http.Server
	url    string
}

// UIOptions describe the Web UI dev serves.
type UIOptions struct {
	// Address is where the UI listens; TemporalAddress the server it talks to, in
	// Namespace by default.
	Address, TemporalAddress, Namespace string
	// CodecEndpoint, when set, is the codec server the UI decodes payloads through, in the
	// browser; it is sent the session's cookie.
	CodecEndpoint string
	// TLS, when set, is the client certificate the UI presents to the server.
	TLS *ClientTLS
	// Session, when set, is what every request must carry (session.Guard): the UI acts
	// on every cluster with the certificate, so whoever reaches its port must not.
	Session *session.Guard
	// Logger receives every request the UI failed (a status of 500 or more, or no answer
	// from the UI server), with its path and how long it took; nil: none.
	Logger *zap.Logger
}

// ClientTLS is a client certificate and the CA that signed the server's.
type ClientTLS struct {
	CAFile, CertFile, KeyFile, ServerName string
}

// StartUI serves the Temporal Web UI at o.Address, talking to the server at
// o.TemporalAddress, and decoding payloads in the browser through o.CodecEndpoint when it
// is set. The UI server itself listens on a private loopback port; what listens on the
// address checks each request's Host (see allowedHost) and session first, and passes the
// rest on.
func StartUI(o UIOptions) (*UI, error) {
	address, temporalAddress, namespace, codecEndpoint := o.Address, o.TemporalAddress, o.Namespace, o.CodecEndpoint
	host, port, err := splitAddress(address)
	if err != nil {
		return nil, fmt.Errorf("ui address: %w", err)
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return nil, err
		}
	}
	front, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("web UI cannot listen on %s: %w", address, err)
	}
	innerPort, err := freePort("127.0.0.1")
	if err != nil {
		front.Close()
		return nil, err
	}
	conf := &uiconfig.Config{
		Host: "127.0.0.1", Port: innerPort,
		TemporalGRPCAddress: temporalAddress,
		DefaultNamespace:    namespace,
		EnableUI:            true,
		HideLogs:            true,
		DisableNewsFetch:    true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		Codec:               uiconfig.Codec{Endpoint: codecEndpoint, IncludeCredentials: o.Session != nil},
	}
	if t := o.TLS; t != nil {
		conf.TLS = uiconfig.TLS{CaFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, EnableHostVerification: true}
	}
	server := uiserver.NewServer(uiopts.WithConfigProvider(conf))
	go func() { _ = server.Start() }()
	inner := &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(innerPort))}
	if err := waitHealthy(inner.String()+"/healthz", 15*time.Second); err != nil {
		front.Close()
		server.Stop()
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(inner)
	proxy.ModifyResponse = cacheImmutableAssets
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		log.Warn("Web UI server did not answer", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		w.WriteHeader(http.StatusBadGateway)
	}
	u := &UI{server: server, url: "http://" + net.JoinHostPort(displayHost(host), strconv.Itoa(port))}
	var pass http.Handler = failuresLogged(proxy, log)
	if o.Session != nil {
		pass = o.Session.Wrap(pass)
	}
	u.front = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !allowedHost(r.Host, host) {
				http.Error(w, fmt.Sprintf("Host %q is not this Web UI's address: open %s", r.Host, u.url), http.StatusMisdirectedRequest)
				return
			}
			pass.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = u.front.Serve(front) }()
	return u, nil
}

// immutableAssets is where the UI's build keeps its scripts and styles, each named by a
// hash of its content.
const immutableAssets = "/_app/immutable/"

// cacheImmutableAssets lets the browser keep the UI's content-named assets: the UI server
// sends them with no cache headers at all, so each page load fetched every one of them
// again: some two hundred requests over a browser's six connections to a host, which on a
// busy machine kept a page blank for more than 45 seconds. Only this browser keeps them
// (private): they are behind the session like everything else here.
func cacheImmutableAssets(res *http.Response) error {
	if res.StatusCode == http.StatusOK && strings.HasPrefix(res.Request.URL.Path, immutableAssets) {
		res.Header.Set("Cache-Control", "private, max-age=31536000, immutable")
	}
	return nil
}

// failuresLogged logs each request next answers with a server error: what a browser shows as
// the UI's error page, said where an operator (or a failed test) can read it.
func failuresLogged(next http.Handler, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.status >= http.StatusInternalServerError {
			log.Warn("Web UI answered with an error", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Int("status", rec.status), zap.Duration("duration", time.Since(start)))
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach what the recorder wraps (to flush a streamed
// answer as it comes).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// allowedHost says whether a request's Host header names this server. A web page can make
// a browser send requests here by rebinding its own domain name to this address (DNS
// rebinding), but the browser then sends that domain as Host. So only IP literals,
// localhost and the name the UI was told to listen on are taken.
func allowedHost(hostHeader, listenHost string) bool {
	name, _, err := net.SplitHostPort(hostHeader)
	if err != nil {
		name = hostHeader
	}
	return name == "localhost" || (name != "" && name == listenHost) || net.ParseIP(name) != nil
}

// URL is where a browser opens the UI.
func (u *UI) URL() string { return u.url }

// Stop closes the UI server and what listens in front of it.
func (u *UI) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := u.front.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		u.front.Close()
	}
	u.server.Stop()
}

func waitHealthy(url string, limit time.Duration) error {
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("web UI did not become healthy at %s within %s: %v", url, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// displayHost turns a wildcard bind address into one a browser on this machine can open.
func displayHost(host string) string {
	if host == "0.0.0.0" || host == "::" || host == "" {
		return "127.0.0.1"
	}
	return host
}
