package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/factory"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/codecserver"
	"github.com/clusterflow/clusterflow/internal/devbinary"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/localca"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/internal/session"
	"github.com/clusterflow/clusterflow/internal/version"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
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
	waitForWorkers, err := startDevWorkers(ctx, f, c, st, profile, logger)
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

// startDevWorkers starts dev's workers (none with --no-worker), in single-host mode or as
// --hosts hosts, once they are registered, and returns the wait for them to end after ctx
// has, which says whose member agents carry on.
func startDevWorkers(ctx context.Context, f devFlags, c client.Client, st *starter.Starter, profile envconfig.ClientConfigProfile, logger *zap.Logger) (wait func() error, err error) {
	conn := agent.Connection{ClientConfigProfile: profile, CodecKeyFile: f.codecKeyFile}
	owner, err := st.NamespaceID(ctx, *f.namespace)
	if err != nil {
		return nil, err
	}
	var workers []devWorker
	if !*f.noWorker {
		settings, err := f.host.settings(logger)
		if err != nil {
			return nil, err
		}
		if workers, err = newDevWorkers(f.host, settings, f.com, agent.Worker{Owner: owner, Namespace: *f.namespace, Connection: conn}, *f.hosts); err != nil {
			return nil, err
		}
	}
	workerDone := make(chan error, len(workers))
	for _, w := range workers {
		opts := worker.Options{TaskQueue: f.com.taskQueue, Backend: w.members, Host: w.host, Logger: logger}
		go func() { workerDone <- worker.Run(ctx, c, opts) }()
	}
	if *f.hosts > 0 {
		// A deploy before the hosts are registered would place nothing on them.
		if err := waitForHosts(ctx, st, *f.hosts); err != nil {
			return nil, err
		}
	}
	return func() error {
		var err error
		for range workers {
			if werr := <-workerDone; werr != nil && err == nil {
				err = werr
			}
		}
		for _, w := range workers {
			if agent, ok := w.members.(interface{ AgentPID() (int, bool) }); !ok {
				continue
			} else if pid, ok := agent.AgentPID(); ok {
				// Detached on purpose, so that stopping dev never kills a script mid-run.
				fmt.Printf("The member agent (pid %d) carries on with any running scripts; it exits after 10 minutes with nothing to do.\n", pid)
			}
		}
		return err
	}, nil
}

// devDataHome is where a root dev keeps its members when their users could not reach the
// default data folder (below root's home, say): a folder of its own per state folder.
const devDataHome = "/var/lib/clusterflow"

// prepareDevData lets the users of a root dev's clusters reach their sandboxes. The state
// folder lets them through to the data kept in it and shows them nothing (0711: they can
// neither list it nor read what is in it, all of it 0600 or 0700). When a folder above it
// does not let them through (root's home, mode 0700), the members go to a folder of their
// own under /var/lib/clusterflow instead, unless --data was given, which is then refused
// saying why (hostFlags.settings).
func prepareDevData(f devFlags) error {
	s := f.host.scripts
	if os.Geteuid() != 0 || (s.allowRoot && s.user == "" && s.uids == "") {
		return nil
	}
	state, err := filepath.Abs(filepath.Dir(*f.db))
	if err != nil {
		return err
	}
	data, err := filepath.Abs(*f.host.data)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(state, data); err == nil && !strings.HasPrefix(rel, "..") {
		if err := os.Chmod(state, 0o711); err != nil {
			return err
		}
	}
	if f.dataGiven || traversable(data) == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(state))
	home := filepath.Join(devDataHome, "dev-"+hex.EncodeToString(sum[:6]))
	for _, dir := range []string{devDataHome, home} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	*f.host.data = filepath.Join(home, "data")
	fmt.Printf("Clusters run as users of their own, who cannot pass through a folder above %s: their sandboxes are kept in %s.\n", data, *f.host.data)
	return nil
}

// maxDevHosts keeps dev's hosts to what one machine makes sense of.
const maxDevHosts = 16

// devWorker is one of dev's workers: single-host (host nil) or one host of --hosts.
type devWorker struct {
	members backend.Backend
	host    *workflows.HostRegistration
}

// newDevWorkers makes dev's workers: one in single-host mode, keeping members in the data
// folder, or one per host, each with a data folder (and agent) of its own beside it.
func newDevWorkers(hf hostFlags, base hostSettings, com common, w agent.Worker, hosts int) ([]devWorker, error) {
	open := func(s hostSettings, w agent.Worker) (backend.Backend, error) {
		o, err := hf.agentOptions(s, "", com)
		if err != nil {
			return nil, err
		}
		o.Worker = w
		return factory.Open(s.Backend, o)
	}
	if hosts == 0 {
		members, err := open(base, w)
		if err != nil {
			return nil, err
		}
		fmt.Printf("Member sandboxes: %s\n", base.Data)
		return []devWorker{{members: members}}, nil
	}
	var workers []devWorker
	for i := 1; i <= hosts; i++ {
		name := fmt.Sprintf("host-%d", i)
		s, hw := base, w
		s.Data, hw.Host, hw.Address = filepath.Join(filepath.Dir(base.Data), "hosts", name), name, "127.0.0.1"
		members, err := open(s, hw)
		if err != nil {
			return nil, err
		}
		workers = append(workers, devWorker{members: members, host: &workflows.HostRegistration{
			Name: name, Address: "127.0.0.1", Timeout: workflows.DefaultHostTimeout, BootID: bootID(), Version: version.Get().String(),
		}})
	}
	fmt.Printf("Hosts:            %d, sandboxes in %s\n", hosts, filepath.Join(filepath.Dir(base.Data), "hosts"))
	return workers, nil
}

// waitForHosts waits, up to a minute, until n hosts are ready.
func waitForHosts(ctx context.Context, st *starter.Starter, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		hosts, err := st.Hosts(ctx)
		ready := 0
		for _, h := range hosts {
			if h.State() == workflows.HostReady {
				ready++
			}
		}
		if err == nil && ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev's %d hosts did not all become ready within a minute (%d are): %v", n, ready, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
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
