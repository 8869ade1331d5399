package cli

// What dev serves beside the Temporal server: its logs, the health gateway and the Web UI.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/codecserver"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/starter"
)

// devLogger writes the logs of dev's server and worker to logFile, or to stderr when it is
// empty: the terminal is for what a newcomer watches, progress and status.
func devLogger(com common, logFile string) (*zap.Logger, func(), error) {
	l, err := com.logger() // checks --log-format and --log-level
	if err != nil || logFile == "" {
		return l, func() {}, err
	}
	l, err = logging.NewFile(com.logFormat, com.logLevel, logFile)
	if err != nil {
		return nil, nil, apperr.Errorf(apperr.Invalid, "--log-file %s: %w", logFile, err)
	}
	return l, func() { _ = l.Sync() }, nil
}

// serverLogger keeps the embedded server's own logs to warnings and above: its info logs
// are about Temporal's internals, not the user's clusters.
func serverLogger(l *zap.Logger) *zap.Logger {
	return l.Named("temporal").WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}

func stopLogged(l *zap.Logger, what string, stop func() error) {
	if err := stop(); err != nil {
		l.Warn("Stopping "+what, zap.Error(err))
	}
}

// serveDevGateway serves the health gateway beside the embedded server, with one token
// (every scope, every cluster: the developer's own) kept in tokenFile, and says where. It returns a function that stops it,
// letting requests in flight finish.
func serveDevGateway(ctx context.Context, address, tokenFile string, opts gateway.Options, st *starter.Starter, logger *zap.Logger) (func(), error) {
	secret, err := gateway.LocalToken(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("gateway token in %s: %w", tokenFile, err)
	}
	opts.Tokens = gateway.Tokens{gateway.TokenFor("dev", []gateway.Scope{gateway.ScopeEvents, gateway.ScopeReplace, gateway.ScopeRead}, gateway.AllClusters, secret)}
	opts.Logger = logger
	g, err := gateway.New(opts, st)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--gateway-address %s: %w (choose another, or --no-gateway)", address, err)
	}
	if !gateway.IsLoopback(address) {
		fmt.Fprintf(os.Stderr, "WARNING: the health gateway listens on %s without TLS: its token crosses the network in the clear.\n", address)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gateway.Serve(ctx, ln, g, "", ""); err != nil {
			logger.Error("Health gateway stopped", zap.Error(err))
		}
	}()
	fmt.Printf("Health gateway:   http://%s  (token in %s)\n", ln.Addr(), tokenFile)
	return func() { cancel(); <-done }, nil
}

// startDevUI serves the Web UI and, with keys, the codec server it decodes payloads
// through, which answers the UI's origin only, and the UI's session alone. It returns what
// stops both.
func startDevUI(ctx context.Context, embedded *Embedded, o EmbeddedUIOptions, keys *codec.Keys, codecAddress string, logger *zap.Logger) (func(), error) {
	if keys == nil {
		ui, err := embedded.StartUI(o)
		if err != nil {
			return nil, err
		}
		fmt.Printf("Temporal Web UI:  %s\n", o.Session.LoginURL(fmt.Sprintf("%s/namespaces/%s/workflows", ui.URL(), o.Namespace)))
		return ui.Stop, nil
	}
	// The UI is told the codec's address before it starts, and the codec the UI's origin after.
	ln, err := net.Listen("tcp", codecAddress)
	if err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--codec-address %s: %w", codecAddress, err)
	}
	o.CodecEndpoint = "http://" + ln.Addr().String()
	ui, err := embedded.StartUI(o)
	if err != nil {
		ln.Close()
		return nil, err
	}
	endpoint := o.CodecEndpoint
	opts := codecserver.Options{AllowedOrigins: browserOrigins(ui.URL()), Session: &o.Session, Logger: logger.Named("codec")}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gateway.Serve(ctx, ln, codecserver.Handler(keys, opts), "", ""); err != nil {
			logger.Error("Codec server stopped", zap.Error(err))
		}
	}()
	fmt.Printf("Temporal Web UI:  %s  (decoding through %s)\n", o.Session.LoginURL(fmt.Sprintf("%s/namespaces/%s/workflows", ui.URL(), o.Namespace)), endpoint)
	return func() { cancel(); <-done; ui.Stop() }, nil
}

// dialAddresses are the addresses clients reach a server listening on address by: a
// wildcard's loopback one first.
func dialAddresses(address string) []string {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return []string{address}
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port), address}
	}
	if host == "127.0.0.1" {
		return []string{address, net.JoinHostPort("localhost", port)}
	}
	return []string{address}
}

// browserOrigins are the origins a browser sends for the UI at url: a UI on 127.0.0.1 is
// also opened as localhost.
func browserOrigins(url string) []string {
	origins := []string{url}
	if rest, ok := strings.CutPrefix(url, "http://127.0.0.1:"); ok {
		origins = append(origins, "http://localhost:"+rest)
	}
	return origins
}
