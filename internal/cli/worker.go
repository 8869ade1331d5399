package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/factory"
	"github.com/clusterflow/clusterflow/internal/gateway"
	"github.com/clusterflow/clusterflow/internal/metrics"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/internal/version"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
)

// hostInfo is what the worker says about its host, or nil in single-host mode. Flags that
// only make sense with --host are refused without it.
func hostInfo(fs *pflag.FlagSet, name, labels, address string, timeout time.Duration) (*workflows.HostRegistration, error) {
	if name == "" {
		for _, f := range []string{"labels", "host-address", "host-timeout"} {
			if fs.Changed(f) {
				return nil, apperr.Errorf(apperr.Invalid, "--%s: only applies with --host", f)
			}
		}
		return nil, nil
	}
	if err := spec.CheckName(name); err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--host: %v", err)
	}
	parsed, err := spec.ParseLabels(labels)
	if err != nil {
		return nil, apperr.Errorf(apperr.Invalid, "--labels: %v", err)
	}
	if timeout < time.Second {
		return nil, apperr.Errorf(apperr.Invalid, "--host-timeout: is %s; it must be at least 1s", timeout)
	}
	if address == "" {
		address = name
	}
	return &workflows.HostRegistration{Name: name, Address: address, Labels: parsed, Timeout: timeout, BootID: bootID(), Version: version.Get().String()}, nil
}

// bootID tells one boot of the machine from the next; CLUSTERFLOW_BOOT_ID_FILE stands in
// for the kernel's file in tests.
func bootID() string {
	file := os.Getenv("CLUSTERFLOW_BOOT_ID_FILE")
	if file == "" {
		file = "/proc/sys/kernel/random/boot_id"
	}
	id, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(id))
}

func runWorker(ctx context.Context, args []string) error {
	preferSmallHeap()
	fs := newFlagSet("worker", "[--data DIR] [--host NAME --labels K=V,... --host-address ADDR] [flags]")
	var conn connection
	conn.register(fs, "info")
	var hf hostFlags
	hf.register(fs, false)
	agentSocket := fs.String("agent-socket", "", "call the agent the host runs as a service of its own at this socket (deploy/systemd/clusterflow-agent.service), which holds the members and runs their scripts; the host's flags are then the agent's (default: start an agent for --data as this worker's user)")
	metricsAddress := fs.String("metrics-address", "", "serve Prometheus metrics at http://ADDRESS/metrics (default off)")
	metricsClusters := fs.Bool("metrics-clusters", false, "with --metrics-address, also report every cluster's members by state, clusters by phase and hosts by state, read from Temporal when scraped (default: on without --host; in a fleet, turn it on for one worker)")
	hostName := fs.String("host", "", "serve this host: its members' activities come to it alone (default: single-host mode, every member here)")
	labels := fs.String("labels", "", "the host's labels, K=V,K=V, for placement selectors and spreadBy")
	// --address already names the Temporal server, as for every other command.
	address := fs.String("host-address", "", "how other members reach this host (default: the host name)")
	hostTimeout := fs.Duration("host-timeout", workflows.DefaultHostTimeout, "how long the host may go unheard of before its members are taken for down")
	stopTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long in-flight activity tasks may take to finish")
	allowClusters := fs.String("allow-clusters", "", "run only clusters whose names match these comma-separated globs, such as 'team-a-*' (default: every cluster)")
	allowNamespaces := fs.String("allow-namespaces", "", "run only clusters of these comma-separated Temporal namespaces (default: every namespace)")
	allowEnvOverride := fs.Bool("allow-env-override", false, "let a spec's env set loader variables (PATH, LD_*, BASH_ENV, …), which choose what code a script runs")
	trustedKeys := fs.String("trusted-keys", "", "run only scripts of specs signed by a key in this file (lines printed by `clusterflow keys new`; default: any spec)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	var trusted signing.Trusted
	if *trustedKeys != "" {
		var err error
		if trusted, err = signing.LoadTrusted(*trustedKeys); err != nil {
			return apperr.Errorf(apperr.Invalid, "--trusted-keys: %v", err)
		}
	}
	host, err := hostInfo(fs, *hostName, *labels, *address, *hostTimeout)
	if err != nil {
		return err
	}
	admission := workflows.Admission{Namespaces: commaList(*allowNamespaces), EnvOverride: *allowEnvOverride}
	if *allowClusters != "" {
		if admission.Clusters, err = gateway.ParseClusters(*allowClusters); err != nil {
			return apperr.Errorf(apperr.Invalid, "--allow-clusters: %v", err)
		}
	}
	if host != nil {
		host.Admission = admission
	}
	logger, err := conn.logger()
	if err != nil {
		return err
	}
	// The backend and who runs scripts are checked before anything connects.
	var settings hostSettings
	if *agentSocket != "" {
		for _, f := range []string{"backend", "data", "secrets-dir", "port-range", "script-uids", "script-user", "allow-root-scripts", "shared-script-user", "docker-host", "publish-address", "allow-privileged", "member-address", "member-cpus", "member-memory", "member-pids"} {
			if fs.Changed(f) {
				return apperr.Errorf(apperr.Invalid, "--%s: with --agent-socket, the host's agent holds the members and runs their scripts; give it the agent (clusterflow agent --%s)", f, f)
			}
		}
		settings.Backend = *hf.backendName
	} else if settings, err = hf.settings(logger); err != nil {
		return err
	}
	backendOpts, err := hf.agentOptions(settings, *agentSocket, conn.common)
	if err != nil {
		return err
	}
	if host != nil {
		backendOpts.Worker.Host, backendOpts.Worker.Address = host.Name, host.Address
	}
	if fs.Changed("metrics-clusters") && *metricsAddress == "" {
		return apperr.Errorf(apperr.Invalid, "--metrics-clusters: only applies with --metrics-address")
	}
	if !fs.Changed("metrics-clusters") {
		*metricsClusters = host == nil && *metricsAddress != ""
	}
	var endpoint *metrics.Endpoint
	if *metricsAddress != "" {
		// Served until the process exits, so that the worker's shutdown is reported too.
		if endpoint, err = metrics.Serve(context.WithoutCancel(ctx), *metricsAddress); err != nil {
			return apperr.Wrap(apperr.Invalid, err)
		}
		conn.metrics = endpoint.SDK()
		logger.Info("Serving metrics", zap.String("url", "http://"+*metricsAddress+"/metrics"), zap.Bool("clusters", *metricsClusters))
	}
	c, co, err := conn.connect(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	if co.TLS == nil && co.APIKey == "" && (*agentSocket != "" || settings.Scripts.PerCluster || settings.Scripts.User != nil) {
		// Members run as other users than this worker, so nothing of its own keeps them
		// from Temporal but what the frontend demands.
		logger.Warn("Connected to Temporal with no credential (no TLS client certificate, no API key) while members run as users of their own: "+
			"any member that reaches "+co.Address+" can act on every cluster of the namespace. Make the frontend demand a client certificate or an API key (see the operator guide's threat model)",
			zap.String("address", co.Address))
	}
	st := starter.New(c, conn.taskQueue)
	if *metricsClusters {
		endpoint.ReportState(st, logger)
	}
	backendOpts.Worker.Namespace = co.Namespace
	if backendOpts.Worker.Owner, err = st.NamespaceID(ctx, co.Namespace); err != nil {
		// Without it, folders would carry no owner, and this worker's orphan removal could
		// not tell another server's clusters sharing the data folder from its own.
		return fmt.Errorf("learn the ID of namespace %q, which marks whose cluster folders are whose: %w", co.Namespace, err)
	}
	missing, err := st.MissingSearchAttributes(ctx, co.Namespace)
	switch {
	case err != nil:
		logger.Warn("Could not check clusterflow's search attributes; continuing", zap.Error(err))
	case len(missing) > 0:
		names := make([]string, 0, len(missing))
		for name := range missing {
			names = append(names, name)
		}
		slices.Sort(names)
		return fmt.Errorf("namespace %q lacks the search attributes %s: run `clusterflow setup` once against it", co.Namespace, strings.Join(names, ", "))
	}
	logger.Info("Worker starting", zap.Stringer("version", version.Get()), zap.String("address", co.Address), zap.String("namespace", co.Namespace),
		zap.String("taskQueue", conn.taskQueue), zap.String("backend", settings.Backend), zap.String("data", backendOpts.Data), zap.String("agentSocket", *agentSocket),
		zap.Strings("allowClusters", admission.Clusters), zap.Strings("allowNamespaces", admission.Namespaces), zap.Bool("allowEnvOverride", admission.EnvOverride),
		zap.Strings("trustedKeys", slices.Sorted(maps.Keys(trusted))))
	backendOpts.Worker.Connection = agent.Connection{ClientConfigProfile: co, CodecKeyFile: conn.codecKeyFile}
	members, err := factory.Open(settings.Backend, backendOpts)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	if endpoint != nil {
		reportAgent(endpoint, members, logger)
	}
	err = worker.Run(ctx, c, worker.Options{
		TaskQueue: conn.taskQueue, Backend: members, StopTimeout: *stopTimeout, Host: host, Logger: logger,
		Admission: admission, Trusted: trusted, NamespaceID: backendOpts.Worker.Owner,
	})
	logger.Info("Worker stopped")
	return err
}

// reportAgent adds what the host's agent runs to the metrics, when members has an agent.
func reportAgent(endpoint *metrics.Endpoint, members backend.Backend, logger *zap.Logger) {
	if a, ok := members.(*agent.RemoteBackend); ok {
		endpoint.ReportAgent(func(ctx context.Context) (int, int, error) {
			status, err := a.AgentStatus(ctx)
			return status.Running, status.Probes, err
		}, logger)
	}
}
