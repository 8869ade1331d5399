// Package devserver runs a real Temporal server inside the current process, backed by SQLite.
// It is what `clusterflow dev` and the integration tests run, so nothing needs installing.
package devserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/ports"
)

const clusterName = "active"

// Options describe one embedded server.
type Options struct {
	// DBFile is the SQLite file holding all state. Empty means an in-memory database that
	// disappears with the process (tests).
	DBFile string
	// Address is the frontend gRPC host:port. Port 0 picks a free port.
	Address string
	// Namespace is created when missing. Defaults to "default".
	Namespace string
	// Logger receives the server's own logs; nil discards them.
	Logger *zap.Logger
	// SearchAttributes are registered with the namespace when it is created. (Adding them
	// later through the OperatorService takes a namespace cache refresh to show.)
	SearchAttributes map[string]enums.IndexedValueType
	// TLS, when set, makes the frontend require mutual TLS.
	TLS *TLS
	// APIKey, when set (with TLS), makes the frontend require it as a bearer token from
	// every caller but the server's own system workers.
	APIKey string
}

// TLS is the frontend's certificate and the CA its clients' certificates must chain to.
// The certificate also serves as the client certificate of the server's own system
// workers, so it needs both server and client key usages, and 127.0.0.1 or the frontend
// host among its names.
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
	// ServerName is the name the system workers verify the certificate against.
	ServerName string
}

// Server is a running embedded Temporal server.
type Server struct {
	server      temporal.Server
	address     string
	httpAddress string
}

// Start creates the database when needed and starts every Temporal service in-process.
func Start(opts Options) (*Server, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	host, frontendPort, err := splitAddress(opts.Address)
	if err != nil {
		return nil, err
	}
	if frontendPort == 0 {
		if frontendPort, err = freePort(host); err != nil {
			return nil, err
		}
	}
	partitions, err := taskQueuePartitions(opts.DBFile)
	if err != nil {
		return nil, err
	}
	sqlConf, err := prepareDatabase(opts.DBFile, opts.Namespace, opts.SearchAttributes)
	if err != nil {
		return nil, err
	}

	ports := map[primitives.ServiceName]int{primitives.FrontendService: frontendPort}
	// The frontend's HTTP API (and Nexus) listens on loopback only.
	httpPort, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	for _, svc := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		// Internal services stay on loopback whatever the frontend binds to.
		if ports[svc], err = freePort("127.0.0.1"); err != nil {
			return nil, err
		}
	}
	address := net.JoinHostPort(host, strconv.Itoa(frontendPort))
	conf := serverConfig(sqlConf, host, ports, httpPort)
	if t := opts.TLS; t != nil {
		conf.Global.TLS.Frontend.Server = config.ServerTLS{
			CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFiles: []string{t.ClientCAFile}, RequireClientAuth: true,
		}
		conf.Global.TLS.SystemWorker = config.WorkerTLS{
			CertFile: t.CertFile, KeyFile: t.KeyFile,
			Client: config.ClientTLS{ServerName: t.ServerName, RootCAFiles: []string{t.ClientCAFile}},
		}
	}

	var logger tlog.Logger = tlog.NewNoopLogger()
	if opts.Logger != nil {
		logger = tlog.NewZapLogger(opts.Logger)
	}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, port := range ports {
		bind := "127.0.0.1"
		if svc == primitives.FrontendService {
			bind = host
		}
		hosts[svc] = static.SingleLocalHost(net.JoinHostPort(bind, strconv.Itoa(port)))
	}
	var extra []temporal.ServerOption
	if opts.APIKey != "" {
		if extra, err = apiKeyOptions(opts.APIKey, opts.TLS); err != nil {
			return nil, err
		}
	}
	srv, err := temporal.NewServer(append([]temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			// Lets an activity scheduled by a workflow task start on the same worker without a
			// round trip through matching: it shortens every member's setup.
			dynamicconfig.EnableActivityEagerExecution.Key(): true,
			// A production server spreads work over many history shards, each reading its task
			// queues at up to 20 polls a second. This server has one shard, so at that rate
			// every workflow task, child start and child completion would wait up to 50 ms.
			dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
			dynamicconfig.TimerProcessorMaxPollRPS.Key():      1000,
			dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
			// Starting an activity reads its scheduled event. A workflow task that schedules
			// hundreds of scripts writes them as one batch, and the default cache (512 KiB)
			// cannot hold it, so every start re-read and decoded the whole batch from SQLite:
			// quadratic in a role's width. 16 MiB holds many batches of hundreds.
			dynamicconfig.EventsCacheMaxSizeBytes.Key(): 16 << 20,
			// Every host's worker keeps long polls open (up to 20); the default of 1,200 per
			// namespace would starve a fleet of 60 hosts of its leases.
			dynamicconfig.FrontendMaxConcurrentLongRunningRequestsPerInstance.Key(): 100_000,
			// One partition a task queue: partitions spread a queue over matching hosts, and
			// this server has one, where each partition of each host's queue costs work of its
			// own: with four, a fleet of 2,000 hosts took twice as long to register.
			dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  partitions,
			dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): partitions,
			// Each loaded task queue checks its metadata in the database once per interval,
			// a read a minute by default for each host's queue: 50 a second for an idle
			// fleet of 3,000. Temporal waits 5 minutes for its own per-namespace queues;
			// the cost is tasks of a backlog read again after a crash, which history drops.
			dynamicconfig.MatchingUpdateAckInterval.Key(): 5 * time.Minute,
			// The HTTP API answers only requests that name it by its loopback address: a web
			// page that rebinds its own domain name to 127.0.0.1 sends its own name as Host.
			dynamicconfig.FrontendHTTPAllowedHosts.Key(): []string{"127.0.0.1:" + strconv.Itoa(httpPort), "localhost:" + strconv.Itoa(httpPort)},
		}),
	}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server on %s: %w", address, err)
	}
	return &Server{server: srv, address: address, httpAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))}, nil
}

// ownerOnly makes the database and its WAL files readable by their owner alone: they hold
// every workflow's inputs and results. SQLite gives the WAL files the database's mode, so
// the database is created 0600 before SQLite opens it, and older ones are narrowed.
func ownerOnly(file string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", file, err)
	}
	f.Close()
	for _, path := range []string{file, file + "-wal", file + "-shm"} {
		if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", path, err)
		}
	}
	return nil
}

// Address is the frontend gRPC address clients dial.
func (s *Server) Address() string { return s.address }

// HTTPAddress is the frontend's HTTP API (loopback only).
func (s *Server) HTTPAddress() string { return s.httpAddress }

// Stop shuts every service down; state in a DB file is kept.
func (s *Server) Stop() error { return s.server.Stop() }

func prepareDatabase(file, namespace string, searchAttributes map[string]enums.IndexedValueType) (*config.SQL, error) {
	sqlConf := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{}}
	if file == "" {
		sqlConf.DatabaseName = uuid.NewString()
		sqlConf.ConnectAttributes["mode"] = "memory"
		sqlConf.ConnectAttributes["cache"] = "shared"
	} else {
		sqlConf.DatabaseName = file
		sqlConf.ConnectAttributes["mode"] = "rwc"
		// Write-ahead logging with NORMAL sync: a killed process loses nothing that was
		// committed (only a power cut could), and each commit skips an fsync.
		sqlConf.ConnectAttributes["journal_mode"] = "wal"
		sqlConf.ConnectAttributes["synchronous"] = "normal"
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("create folder for %s: %w", file, err)
		}
	}
	// A file needs its schema the first time; the SQLite plugin sets up a memory database
	// itself.
	_, statErr := os.Stat(file)
	fresh := file != "" && errors.Is(statErr, os.ErrNotExist)
	if file != "" {
		if err := ownerOnly(file); err != nil {
			return nil, err
		}
	}
	if fresh {
		if err := sqliteschema.SetupSchema(sqlConf); err != nil {
			return nil, fmt.Errorf("create temporal schema in %s: %w", describeDB(file), err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, searchAttributes)
	if err != nil {
		return nil, err
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return nil, fmt.Errorf("create namespace %q in %s: %w", namespace, describeDB(file), err)
	}
	return sqlConf, nil
}

// taskQueuePartitions is how many partitions each task queue has: one, except in a
// database made by a version from before, whose queues may hold tasks in the server's
// default four, which fewer read partitions would never deliver. A marker file beside the
// database says it was made with one.
func taskQueuePartitions(file string) (int, error) {
	if file == "" {
		return 1, nil
	}
	marker := file + ".partitions"
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return 0, fmt.Errorf("create folder for %s: %w", file, err)
		}
		return 1, os.WriteFile(marker, []byte("1\n"), 0o600)
	}
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == "1" {
		return 1, nil
	}
	return 4, nil // the server's default
}

func serverConfig(sqlConf *config.SQL, host string, ports map[primitives.ServiceName]int, httpPort int) *config.Config {
	frontend := net.JoinHostPort(host, strconv.Itoa(ports[primitives.FrontendService]))
	conf := &config.Config{}
	conf.Global.Membership = config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: "127.0.0.1"}
	conf.Persistence = config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlConf}},
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend,
			HTTPAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for svc, port := range ports {
		bind := "127.0.0.1"
		if svc == primitives.FrontendService {
			bind = host
		}
		var s config.Service
		s.RPC.GRPCPort = port
		s.RPC.BindOnIP = bind
		if svc == primitives.FrontendService {
			s.RPC.HTTPPort = httpPort
		}
		conf.Services[string(svc)] = s
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	return conf
}

func splitAddress(address string) (string, int, error) {
	if address == "" {
		return "127.0.0.1", 0, nil
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: port must be a number from 0 to 65535", address)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// freePort reserves a port on host: the server exits the process when a bind fails, so a
// port found free must stay free until the server binds it.
func freePort(host string) (int, error) {
	return ports.Reserve(host)
}

func describeDB(file string) string {
	if file == "" {
		return "the in-memory database"
	}
	return file
}
