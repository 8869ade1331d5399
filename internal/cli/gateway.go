package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/starter"
)

func runGateway(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "token" {
		return runGatewayToken(args[1:])
	}
	fs := newFlagSet("gateway", "--listen ADDR --tokens-file FILE [flags] | gateway token NAME --scope events,read [--clusters GLOBS]")
	var conn connection
	conn.register(fs, "info")
	listen := fs.String("listen", "127.0.0.1:8088", "address to serve HTTP on")
	var gf gatewayFlags
	gf.register(fs)
	tokensFile := fs.String("tokens-file", "", "token file: one 'NAME SCOPES CLUSTERS SHA256HEX' per line (see `clusterflow gateway token`)")
	insecure := fs.Bool("insecure-no-auth", false, "serve without tokens (loopback --listen only)")
	certFile := fs.String("tls-cert", "", "TLS certificate file (with --tls-key)")
	keyFile := fs.String("tls-key", "", "TLS key file (with --tls-cert)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "gateway takes no arguments, got %q", fs.Args())
	}
	if (*certFile == "") != (*keyFile == "") {
		return apperr.Errorf(apperr.Invalid, "--tls-cert and --tls-key: give both or neither")
	}
	if *insecure && !gateway.IsLoopback(*listen) {
		return apperr.Errorf(apperr.Invalid, "--insecure-no-auth: only allowed on a loopback --listen address, not %s", *listen)
	}
	opts, err := gf.options()
	if err != nil {
		return err
	}
	opts.InsecureNoAuth = *insecure
	if *tokensFile != "" {
		if opts.Tokens, err = gateway.ReadTokens(*tokensFile); err != nil {
			return apperr.Wrap(apperr.Invalid, err)
		}
	}
	logger, err := conn.logger()
	if err != nil {
		return err
	}
	opts.Logger = logger
	// A lazy client lets the gateway start, and answer 503, while Temporal is down.
	co, _, err := starter.ClientOptions(starter.ConnectOptions{Address: conn.address, Namespace: conn.namespace, Logger: logging.SDK(logger), CodecKeyFile: conn.codecKeyFile})
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	cl, err := client.NewLazyClient(co)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	defer cl.Close()
	g, err := gateway.New(opts, starter.New(cl, conn.taskQueue).WithDataConverter(co.DataConverter))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "--listen %s: %w", *listen, err)
	}
	if *certFile == "" && !gateway.IsLoopback(*listen) {
		logger.Warn("Serving plain HTTP on a non-loopback address: tokens cross the network in the clear; use --tls-cert and --tls-key")
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	logger.Info("Gateway serving", zap.String("url", fmt.Sprintf("%s://%s", scheme, ln.Addr())), zap.String("temporal", co.HostPort), zap.Int("tokens", len(opts.Tokens)))
	return gateway.Serve(ctx, ln, g, *certFile, *keyFile)
}

// gatewayFlags are the gateway's settings that dev shares.
type gatewayFlags struct {
	origins, hosts                        string
	clusterLabel, memberLabel, eventLabel string
	rate                                  float64
	burst                                 int
	temporalTimeout                       time.Duration
}

func (f *gatewayFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.origins, "allowed-origins", "", "comma-separated browser origins allowed to call the gateway (CORS); none by default")
	fs.StringVar(&f.hosts, "allowed-hosts", "", "comma-separated names callers may give as Host, besides IP addresses and localhost (a name in DNS or a proxy's); none by default")
	fs.StringVar(&f.clusterLabel, "cluster-label", gateway.DefaultLabels.Cluster, "alert label naming the cluster")
	fs.StringVar(&f.memberLabel, "member-label", gateway.DefaultLabels.Member, "alert label naming the member")
	fs.StringVar(&f.eventLabel, "event-label", gateway.DefaultLabels.Event, "alert label that may say gone or unhealthy instead of down")
	fs.Float64Var(&f.rate, "rate", gateway.DefaultRate, "requests or alerts per second allowed to each token (a notification from Alertmanager counts its alerts)")
	fs.IntVar(&f.burst, "burst", gateway.DefaultBurst, "requests or alerts a token may send at once above --rate")
	fs.DurationVar(&f.temporalTimeout, "temporal-timeout", gateway.DefaultTemporalTimeout, "how long to wait for Temporal before answering 503")
}

func (f *gatewayFlags) options() (gateway.Options, error) {
	opts := gateway.Options{
		Labels: gateway.Labels{Cluster: f.clusterLabel, Member: f.memberLabel, Event: f.eventLabel},
		Rate:   f.rate, Burst: f.burst, TemporalTimeout: f.temporalTimeout,
	}
	opts.AllowedOrigins = commaList(f.origins)
	opts.AllowedHosts = commaList(f.hosts)
	switch {
	case f.rate <= 0:
		return opts, apperr.Errorf(apperr.Invalid, "--rate %g: must be more than 0", f.rate)
	case f.burst <= 0:
		return opts, apperr.Errorf(apperr.Invalid, "--burst %d: must be more than 0", f.burst)
	case f.temporalTimeout <= 0 || f.temporalTimeout > 50*time.Second:
		// Answers must come within the server's 60 s write timeout.
		return opts, apperr.Errorf(apperr.Invalid, "--temporal-timeout %s: must be more than 0 and at most 50s", f.temporalTimeout)
	}
	return opts, nil
}

// runGatewayToken prints a new token and the token file line that accepts it.
func runGatewayToken(args []string) error {
	fs := newFlagSet("gateway token", "NAME [--scope events,replace,read,codec] [--clusters GLOB,...]")
	scope := fs.String("scope", "events", "what the token may do: events (down, up), replace (gone, unhealthy: replaces members and deletes their data), read, codec (decrypt through `clusterflow codec-server`); a comma list")
	clusters := fs.String("clusters", "*", "the clusters the token may act on or read: a comma list of globs, such as 'team-a-*'")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "gateway token takes one NAME, got %d arguments", fs.NArg())
	}
	scopes, err := gateway.ParseScopes(*scope)
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "--scope: %s", err)
	}
	globs, err := gateway.ParseClusters(*clusters)
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "--clusters: %s", err)
	}
	secret, line, err := gateway.NewToken(fs.Arg(0), scopes, globs)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	fmt.Println(secret)
	fmt.Println(line)
	return nil
}
