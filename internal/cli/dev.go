package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/internal/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
)

// Embedded starts the embedded Temporal server and Web UI. Only cmd/clusterflow links
// them (internal/devserver): they are most of its size and start-up memory.
type Embedded struct {
	StartServer func(opts EmbeddedServerOptions) (EmbeddedServer, error)
	StartUI     func(address, temporalAddress, namespace string) (EmbeddedUI, error)
}

// EmbeddedServerOptions describe the embedded server dev starts.
type EmbeddedServerOptions struct {
	DBFile, Address, Namespace string
	Logger                     *zap.Logger
	SearchAttributes           map[string]enums.IndexedValueType
}

// EmbeddedServer and EmbeddedUI are what dev needs of a running server and UI.
type (
	EmbeddedServer interface {
		Address() string
		Stop() error
	}
	EmbeddedUI interface {
		URL() string
		Stop()
	}
)

func runDev(ctx context.Context, args []string, embedded *Embedded) error {
	if embedded == nil {
		return apperr.Errorf(apperr.Invalid, "this binary has no embedded Temporal server: run `clusterflow dev` (cmd/clusterflow), or point it at a server with --address")
	}
	fs := newFlagSet("dev", "[-f SPEC] [flags]")
	var com common
	com.register(fs, "info")
	file := fs.StringP("file", "f", "", "cluster spec to deploy once everything is up")
	db := fs.String("db", ".clusterflow/dev.db", "SQLite file holding Temporal's state")
	data := fs.String("data", ".clusterflow/data", "folder for member sandboxes")
	address := fs.String("address", "127.0.0.1:7233", "Temporal gRPC listen address")
	uiAddress := fs.String("ui-address", "127.0.0.1:8233", "Web UI listen address")
	noUI := fs.Bool("no-ui", false, "do not serve the Web UI")
	noWorker := fs.Bool("no-worker", false, "do not run a worker (run `clusterflow worker` separately)")
	namespace := fs.String("namespace", "default", "Temporal namespace to create and use")
	logFile := fs.String("log-file", ".clusterflow/dev.log", "file for the server's and worker's logs, so the terminal shows progress and status; empty for stderr")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	logger, closeLog, err := devLogger(com, *logFile)
	if err != nil {
		return err
	}
	defer closeLog()
	var cluster *spec.Cluster
	if *file != "" {
		c, err := spec.Load(*file)
		if err != nil {
			return err
		}
		cluster = &c
	}
	for _, a := range []string{*address, *uiAddress} {
		if !isLoopback(a) {
			fmt.Fprintf(os.Stderr, "WARNING: listening on %s: the embedded server has no authentication, so anyone who can reach it controls your clusters.\n", a)
		}
	}

	srv, err := embedded.StartServer(EmbeddedServerOptions{
		DBFile: *db, Address: *address, Namespace: *namespace, Logger: serverLogger(logger),
		SearchAttributes: workflows.SearchAttributeTypes(),
	})
	if err != nil {
		return err
	}
	defer stopLogged(logger, "Temporal server", srv.Stop)
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: *namespace, Logger: logging.SDK(logger)})
	if err != nil {
		return fmt.Errorf("connect to the embedded server: %w", err)
	}
	defer c.Close()
	st := starter.New(c, com.taskQueue)
	if _, err := st.Setup(ctx, *namespace); err != nil {
		return err
	}
	fmt.Printf("Temporal server:  %s  (namespace %s, state in %s)\n", srv.Address(), *namespace, *db)
	if *logFile != "" {
		fmt.Printf("Logs:             %s\n", *logFile)
	}
	if !*noUI {
		ui, err := embedded.StartUI(*uiAddress, srv.Address(), *namespace)
		if err != nil {
			return err
		}
		defer ui.Stop()
		fmt.Printf("Temporal Web UI:  %s/namespaces/%s/workflows\n", ui.URL(), *namespace)
	}

	workerDone := make(chan error, 1)
	var local *backend.Local
	if *noWorker {
		workerDone <- nil
	} else {
		local, err = localBackend(*data, com)
		if err != nil {
			return err
		}
		fmt.Printf("Member sandboxes: %s\n", *data)
		opts := worker.Options{TaskQueue: com.taskQueue, Backend: local,
			Connection: agent.Connection{Address: srv.Address(), Namespace: *namespace}}
		go func() { workerDone <- worker.Run(ctx, c, opts) }()
	}
	fmt.Println("Ready. Press Ctrl-C to stop.")

	if cluster != nil {
		deployAndWatch(ctx, st, *cluster)
	}
	<-ctx.Done()
	fmt.Println("\nStopping.")
	err = <-workerDone
	if local != nil {
		if pid, ok := local.AgentPID(); ok {
			// Detached on purpose, so that stopping dev never kills a script mid-run.
			fmt.Printf("The member agent (pid %d) carries on with any running scripts; it exits after 10 minutes with nothing to do.\n", pid)
		}
	}
	return err
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
		render.Status(os.Stdout, final, time.Now())
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
	l, f, err := logging.NewFile(com.logFormat, com.logLevel, logFile)
	if err != nil {
		return nil, nil, apperr.Errorf(apperr.Invalid, "--log-file %s: %w", logFile, err)
	}
	return l, func() { _ = l.Sync(); f.Close() }, nil
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

func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
