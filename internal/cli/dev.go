package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/devbinary"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/localca"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/internal/metrics"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/internal/session"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// Embedded starts the embedded Temporal server and Web UI. Only cmd/clusterflow-dev links
// them (internal/devserver): they are most of its size, start-up time and memory.
type Embedded struct {
	// Elsewhere, in a binary without them, finds the binary that has them, which `dev`
	// then runs in this process's place.
	Elsewhere func() (string, error)

	StartServer func(opts EmbeddedServerOptions) (EmbeddedServer, error)
	StartUI     func(opts EmbeddedUIOptions) (EmbeddedUI, error)
}

// EmbeddedServerOptions describe the embedded server dev starts.
type EmbeddedServerOptions struct {
	DBFile, Address, Namespace string
	Logger                     *zap.Logger
	SearchAttributes           map[string]enums.IndexedValueType
	// TLS makes the server demand a client certificate of its CA from every caller.
	TLS localca.Files
}

// EmbeddedUIOptions describe the Web UI dev serves: at Address, for the server at
// TemporalAddress, which it reaches with TLS's client certificate, decoding payloads through
// CodecEndpoint when set, to a browser that carries Session.
type EmbeddedUIOptions struct {
	Address, TemporalAddress, Namespace, CodecEndpoint string
	TLS                                                localca.Files
	Session                                            session.Guard
	// Logger receives the requests the UI failed.
	Logger *zap.Logger
}

// EmbeddedServer and EmbeddedUI are what dev needs of a running server and UI.
type (
	EmbeddedServer interface {
		Address() string
		// HTTPAddress is the frontend's HTTP API, on loopback.
		HTTPAddress() string
		Stop() error
	}
	EmbeddedUI interface {
		URL() string
		Stop()
	}
)

// devFlags are dev's flags, checked.
type devFlags struct {
	com                                                       common
	gf                                                        gatewayFlags
	host                                                      hostFlags
	file, db, namespace                                       *string
	address, uiAddress, gatewayAddress, codecAddress, logFile *string
	metricsAddress                                            *string
	noUI, noGateway, noWorker                                 *bool
	hosts                                                     *int
	codecKeyFile                                              string
	keys                                                      *codec.Keys
	// dataGiven says --data was given: dev then keeps members there, or says why it cannot.
	dataGiven bool
}

// parseDevFlags reads and checks dev's flags, before anything starts.
func parseDevFlags(args []string) (devFlags, error) {
	var f devFlags
	fs := newFlagSet("dev", "[-f SPEC] [flags]")
	f.com.register(fs, "info")
	f.file = fs.StringP("file", "f", "", "cluster spec to deploy once everything is up")
	f.db = fs.String("db", ".clusterflow/dev.db", "SQLite file holding Temporal's state")
	f.host.register(fs, true)
	f.address = fs.String("address", "127.0.0.1:7233", "Temporal gRPC listen address")
	f.uiAddress = fs.String("ui-address", "127.0.0.1:8233", "Web UI listen address")
	f.noUI = fs.Bool("no-ui", false, "do not serve the Web UI")
	f.gatewayAddress = fs.String("gateway-address", "127.0.0.1:8088", "health gateway listen address (HTTP; its token is kept beside --db, in gateway-token)")
	f.noGateway = fs.Bool("no-gateway", false, "do not serve the health gateway")
	f.gf.register(fs)
	f.metricsAddress = fs.String("metrics-address", "", "serve Prometheus metrics at http://ADDRESS/metrics: the workers', what the workflows count, every cluster's members by state and, in single-host mode, the agent's (default off)")
	f.noWorker = fs.Bool("no-worker", false, "do not run a worker (run `clusterflow worker` separately)")
	f.hosts = fs.Int("hosts", 0, "run N hosts in this process, host-1 … host-N, each a worker with its own data folder beside --data, so members are placed on hosts (0: single-host mode)")
	f.namespace = fs.String("namespace", "default", "Temporal namespace to create and use")
	codecKeyFlag(fs, &f.codecKeyFile)
	f.codecAddress = fs.String("codec-address", "127.0.0.1:8089", "with --codec-key-file, where the codec server the Web UI decodes through listens (loopback only)")
	f.logFile = fs.String("log-file", "", "file for the server's and worker's logs, so the terminal shows progress and status (default: dev.log beside --db); empty for stderr")
	if err := fs.Parse(args); err != nil {
		return f, flagError(err)
	}
	f.dataGiven = fs.Changed("data")
	if !fs.Changed("log-file") {
		*f.logFile = filepath.Join(filepath.Dir(*f.db), "dev.log")
	}
	if *f.hosts < 0 || *f.hosts > maxDevHosts {
		return f, apperr.Errorf(apperr.Invalid, "--hosts: is %d; it must be from 0 to %d", *f.hosts, maxDevHosts)
	}
	if *f.hosts > 0 && *f.noWorker {
		return f, apperr.Errorf(apperr.Invalid, "--hosts: runs workers, so it cannot go with --no-worker")
	}
	if err := checkBackend(*f.host.backendName); err != nil {
		return f, err
	}
	var err error
	if f.codecKeyFile, err = absoluteKeyFile(f.codecKeyFile); err != nil {
		return f, err
	}
	if f.codecKeyFile != "" {
		if f.keys, err = codec.LoadKeys(f.codecKeyFile); err != nil {
			return f, apperr.Wrap(apperr.Invalid, err)
		}
		if !gateway.IsLoopback(*f.codecAddress) {
			return f, apperr.Errorf(apperr.Invalid, "--codec-address %s: dev's codec server decrypts for whoever reaches it, so it listens on loopback only", *f.codecAddress)
		}
	}
	return f, nil
}

func runDev(ctx context.Context, args []string, embedded *Embedded) error {
	if embedded == nil {
		return apperr.Errorf(apperr.Invalid, "this binary has no embedded Temporal server: run `clusterflow dev` (cmd/clusterflow), or point it at a server with --address")
	}
	if embedded.StartServer == nil {
		path, err := embedded.Elsewhere()
		if err != nil {
			return apperr.Errorf(apperr.Unavailable, "dev: %v", err)
		}
		return devbinary.Exec(path, append([]string{"dev"}, args...))
	}
	preferSmallHeap()
	f, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	logger, closeLog, err := devLogger(f.com, *f.logFile)
	if err != nil {
		return err
	}
	defer closeLog()
	// What the embedded Web UI and the server's HTTP listeners log through the standard
	// logger (certificates loaded, a client without one refused) goes to the log too.
	defer zap.RedirectStdLog(logger.Named("std"))()
	var cluster *spec.Cluster
	if *f.file != "" {
		c, err := spec.Load(*f.file)
		if err != nil {
			return err
		}
		cluster = &c
	}
	gatewayOpts, err := f.gf.options()
	if err != nil {
		return err
	}
	if !gateway.IsLoopback(*f.uiAddress) && !*f.noUI {
		fmt.Fprintf(os.Stderr, "WARNING: the Web UI listens on %s over plain HTTP: the secret that lets a browser in crosses the network in the clear.\n", *f.uiAddress)
	}
	// The server demands a client certificate of dev's own CA, kept in its state folder:
	// a member's script, which runs as a user of its cluster's, cannot read it.
	certs, err := localca.Ensure(filepath.Join(filepath.Dir(*f.db), "tls"), nil)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	srv, err := embedded.StartServer(EmbeddedServerOptions{
		DBFile: *f.db, Address: *f.address, Namespace: *f.namespace, Logger: serverLogger(logger),
		SearchAttributes: workflows.SearchAttributeTypes(), TLS: certs,
	})
	if err != nil {
		return err
	}
	defer stopLogged(logger, "Temporal server", srv.Stop)
	profile := envconfig.ClientConfigProfile{Address: srv.Address(), Namespace: *f.namespace, TLS: &envconfig.ClientConfigTLS{
		ClientCertPath: certs.ClientCert, ClientKeyPath: certs.ClientKey, ServerCACertPath: certs.CA, ServerName: localca.ServerName,
	}}
	removeProfiles, err := starter.WriteDevProfile(profile, dialAddresses(srv.Address()))
	defer removeProfiles()
	if err != nil {
		return fmt.Errorf("write the client profile of the embedded server: %w", err)
	}
	co, err := profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return err
	}
	co.Logger = logging.SDK(logger)
	var endpoint *metrics.Endpoint
	if *f.metricsAddress != "" {
		// Served until the process exits, so that the workers' shutdown is reported too.
		if endpoint, err = metrics.Serve(context.WithoutCancel(ctx), *f.metricsAddress); err != nil {
			return apperr.Wrap(apperr.Invalid, err)
		}
		co.MetricsHandler = endpoint.SDK()
	}
	if err := codec.Apply(&co, f.codecKeyFile); err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	c, err := client.DialContext(ctx, co)
	if err != nil {
		return fmt.Errorf("connect to the embedded server: %w", err)
	}
	defer c.Close()
	st := starter.New(c, f.com.taskQueue).WithDataConverter(co.DataConverter)
	if _, err := st.Setup(ctx, *f.namespace); err != nil {
		return err
	}
	profilePath, _ := starter.DevProfilePath(dialAddresses(srv.Address())[0])
	fmt.Printf("Temporal server:  %s  (namespace %s, state in %s; mutual TLS, its client settings in %s)\n", srv.Address(), *f.namespace, *f.db, profilePath)
	logger.Info("Temporal HTTP API serving", zap.String("address", srv.HTTPAddress()))
	if *f.logFile != "" {
		fmt.Printf("Logs:             %s\n", *f.logFile)
	}
	if endpoint != nil {
		endpoint.ReportState(st, logger)
		fmt.Printf("Metrics:          http://%s/metrics\n", *f.metricsAddress)
	}
	if !*f.noUI {
		tokenFile := filepath.Join(filepath.Dir(*f.db), "ui-token")
		secret, err := gateway.LocalToken(tokenFile)
		if err != nil {
			return fmt.Errorf("Web UI secret in %s: %w", tokenFile, err)
		}
		ui := EmbeddedUIOptions{Address: *f.uiAddress, TemporalAddress: srv.Address(), Namespace: *f.namespace, TLS: certs,
			Session: session.Guard{Secret: secret, File: tokenFile}, Logger: logger.Named("ui")}
		stop, err := startDevUI(ctx, embedded, ui, f.keys, *f.codecAddress, logger)
		if err != nil {
			return err
		}
		defer stop()
	}

	if !*f.noGateway {
		stop, err := serveDevGateway(ctx, *f.gatewayAddress, filepath.Join(filepath.Dir(*f.db), "gateway-token"), gatewayOpts, st, logger)
		if err != nil {
			return err
		}
		defer stop()
	}

	if err := prepareDevData(f); err != nil {
		return err
	}
	waitForWorkers, err := startDevWorkers(ctx, f, c, st, profile, endpoint, logger)
	if err != nil {
		return err
	}
	fmt.Println("Ready. Press Ctrl-C to stop.")

	if cluster != nil {
		deployAndWatch(ctx, st, *cluster)
	}
	<-ctx.Done()
	fmt.Println("\nStopping.")
	return waitForWorkers()
}

// deployAndWatch deploys the spec given to dev, or picks up the cluster if a previous run
// already deployed it, and shows its progress. Problems are printed; dev keeps serving.
func deployAndWatch(ctx context.Context, st *starter.Starter, c spec.Cluster) {
	err := st.Deploy(ctx, c, starter.DeployOptions{})
	switch {
	case apperr.Is(err, apperr.Conflict): // the only conflict of a deploy: the name is taken
		fmt.Printf("Cluster %s already exists in this database; showing it.\n", c.Name)
	case err != nil:
		fmt.Fprintln(os.Stderr, "clusterflow:", err)
		return
	default:
		fmt.Printf("Deploying %s.\n", workflows.Summary(c))
	}
	final, err := waitFor(ctx, st, c.Name, 0, func(s workflows.ClusterStatus) bool { return s.Settled(s.Generation) })
	if err == nil {
		err = settled(final)
	}
	if ctx.Err() != nil {
		return
	}
	if final.Name != "" {
		fmt.Println()
		render.Status(os.Stdout, final, time.Now(), false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterflow:", err)
	}
}
