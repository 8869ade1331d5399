package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The production path of docker-compose.yml, run without Docker: PostgreSQL, the schema job
// (deploy/temporal-schema.sh with the server's own SQL tool), the certificate job (the
// clusterflow binary with the job's command), the Temporal server's official entry point
// with the environment the compose file gives the temporalio/server image, and the
// namespace job. A volume is a folder of the server's own; a file the compose file mounts
// from the checkout is read there. The tests and the benchmarks both run it.

// ComposeOverrides are the only settings of the compose file's temporal service that the
// production server here changes, and why: it binds loopback only, on reserved ports, and
// reads files from the checkout rather than from the container's mounts.
var ComposeOverrides = map[string]string{
	"POSTGRES_SEEDS":           "postgresql is the compose service's host name; here the database listens on loopback",
	"DB_PORT":                  "a reserved port, not 5432",
	"BIND_ON_IP":               "loopback, not every interface",
	"DYNAMIC_CONFIG_FILE_PATH": "the file the compose file mounts, read from the checkout",
}

// ProductionServer is Temporal's own server on a private PostgreSQL, configured as
// docker-compose.yml configures it.
type ProductionServer struct {
	// Address is the frontend's gRPC address.
	Address string
	// ClientEnv is how the compose file's hosts reach the server (TEMPORAL_TLS_*), with the
	// files of their volume: a client of the stack.
	ClientEnv []string
	dir       string
	tools     TemporalTools
	pg        *Postgres
	env       []string
	// control and hosts are the client certificates' folders of the compose file's
	// namespace job and of its hosts.
	control, hosts string
}

// NewProductionServer starts PostgreSQL in a folder under dir and runs the compose file's
// schema job against it. Start then starts the server itself, as often as needed.
func NewProductionServer(dir string) (*ProductionServer, error) {
	compose, err := ReadCompose()
	if err != nil {
		return nil, err
	}
	tools, err := Temporal()
	if err != nil {
		return nil, err
	}
	db := compose.Services["postgresql"].Environment
	pg, err := StartPostgres(dir, db["POSTGRES_USER"], db["POSTGRES_PASSWORD"])
	if err != nil {
		return nil, err
	}
	p := &ProductionServer{dir: dir, tools: tools, pg: pg}
	if err := p.runSchemaJob(compose); err != nil {
		pg.Stop()
		return nil, err
	}
	if err := p.runCertsJob(compose); err != nil {
		pg.Stop()
		return nil, err
	}
	if p.env, err = p.serverEnv(compose); err != nil {
		pg.Stop()
		return nil, err
	}
	host := compose.Services["clusterflow-host-1"]
	for k, v := range host.Environment {
		if strings.HasPrefix(k, "TEMPORAL_TLS_") {
			p.ClientEnv = append(p.ClientEnv, k+"="+p.local(host, v))
		}
	}
	slices.Sort(p.ClientEnv)
	p.control = p.local(compose.Services["temporal-namespace"], "/etc/temporal/tls")
	p.hosts = filepath.Dir(p.local(host, host.Environment["TEMPORAL_TLS_CLIENT_CERT_PATH"]))
	p.Address = "127.0.0.1:" + envValue(p.env, "FRONTEND_GRPC_PORT")
	return p, nil
}

// runSchemaJob runs what the compose file's temporal-schema service runs, with its
// environment, against the private database.
func (p *ProductionServer) runSchemaJob(compose ComposeFile) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	env := os.Environ()
	for k, v := range compose.Services["temporal-schema"].Environment {
		env = append(env, k+"="+v)
	}
	env = append(env, "SQL_HOST=127.0.0.1", "SQL_PORT="+strconv.Itoa(p.pg.Port), "TEMPORAL_SCHEMA_DIR="+p.tools.SchemaDir,
		"PATH="+filepath.Dir(p.tools.SQLTool)+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "deploy", "temporal-schema.sh"))
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Temporal schemas are up to date.") {
		return fmt.Errorf("the schema job: %v\n%s", err, out)
	}
	return nil
}

// serverEnv is the compose file's environment for the temporal service, with
// ComposeOverrides applied and every port the server opens reserved.
func (p *ProductionServer) serverEnv(compose ComposeFile) ([]string, error) {
	service := compose.Services["temporal"]
	values := map[string]string{}
	for k, v := range service.Environment {
		values[k] = v
	}
	// The dynamic config file is the one the compose file mounts where it points the server;
	// the certificates, the certificate job's in the server's volume.
	config := values["DYNAMIC_CONFIG_FILE_PATH"]
	mounted := ""
	for _, v := range service.Volumes {
		if _, dst, ok := strings.Cut(v, ":"); ok && strings.HasSuffix(strings.TrimSuffix(dst, ":ro"), config) {
			mounted = p.local(service, strings.TrimSuffix(dst, ":ro"))
		}
	}
	if mounted == "" {
		return nil, fmt.Errorf("docker-compose.yml mounts no file at DYNAMIC_CONFIG_FILE_PATH %q", config)
	}
	for k, v := range values {
		if strings.HasPrefix(k, "TEMPORAL_TLS_") {
			values[k] = p.local(service, v)
		}
	}
	values["POSTGRES_SEEDS"], values["DB_PORT"], values["BIND_ON_IP"] = "127.0.0.1", strconv.Itoa(p.pg.Port), "127.0.0.1"
	values["DYNAMIC_CONFIG_FILE_PATH"] = mounted
	for _, name := range []string{"FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT", "FRONTEND_MEMBERSHIP_PORT", "HISTORY_GRPC_PORT",
		"HISTORY_MEMBERSHIP_PORT", "MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT", "WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT"} {
		address, err := FreeAddress()
		if err != nil {
			return nil, err
		}
		values[name] = address[strings.LastIndexByte(address, ':')+1:]
	}
	var env []string
	for k, v := range values {
		env = append(env, k+"="+v)
	}
	return env, nil
}

// local is where a path in service's container is here: under the volume or mount that
// holds it, a file of the checkout (./…), or else a folder of this server's (a named
// volume, or a folder the certificate job fills in). Other paths are as they are.
func (p *ProductionServer) local(service ComposeService, path string) string {
	for _, v := range service.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			continue
		}
		rest, ok := strings.CutPrefix(path, parts[1])
		if !ok || (rest != "" && rest[0] != '/') {
			continue
		}
		if src, ok := strings.CutPrefix(parts[0], "./"); ok {
			if root, err := ModuleRoot(); err == nil {
				if fi, err := os.Stat(filepath.Join(root, src)); err == nil && fi.Mode().IsRegular() {
					return filepath.Join(root, src) + rest
				}
			}
		}
		return filepath.Join(p.dir, "volumes", strings.TrimPrefix(parts[0], "./")) + rest
	}
	return path
}

// runCertsJob runs the compose file's certificate job: its command, with the clusterflow
// binary, its folders mapped to this server's volumes. As root, the owners are the job's,
// but the image's clusterflow user where this machine has none (the uid the shipped-host
// tests give the worker); as another user, every folder is that user's.
func (p *ProductionServer) runCertsJob(compose ComposeFile) error {
	service := compose.Services["clusterflow-certs"]
	bin, err := Binary()
	if err != nil {
		return err
	}
	var args []string
	for _, a := range service.Command {
		if a, err = InterpolateCompose(a, ComposeVars); err != nil {
			return fmt.Errorf("docker-compose.yml: clusterflow-certs: %w", err)
		}
		if dir, owner, ok := strings.Cut(a, "="); ok && strings.HasPrefix(dir, "/") {
			switch {
			case os.Geteuid() != 0:
				owner = strconv.Itoa(os.Getuid())
			case owner == "clusterflow" && !userExists(owner):
				owner = strconv.Itoa(ImageWorkerUID)
			}
			a = p.local(service, dir) + "=" + owner
		} else if strings.HasPrefix(a, "/") {
			a = p.local(service, a)
		}
		args = append(args, a)
	}
	// Each volume's mount point is there before the job runs, root's with mode 0755, as
	// the engine makes it.
	for _, v := range service.Volumes {
		if _, dst, ok := strings.Cut(v, ":"); ok {
			if err := os.MkdirAll(p.local(service, strings.TrimSuffix(dst, ":ro")), 0o755); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("the certificate job (clusterflow %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// ImageWorkerUID stands for the image's clusterflow user on a machine that has none: the
// certificate job's owner of the hosts' folder, and the shipped-host tests' worker.
const ImageWorkerUID = 60990

func userExists(name string) bool {
	_, err := user.Lookup(name)
	return err == nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Start starts the server, its output in dir/NAME.stdout and .stderr, and returns once it
// has the default namespace, as the compose file's namespace job makes it: 7 days'
// retention, created if it is not there yet.
func (p *ProductionServer) Start(name string) (*Process, error) {
	proc, err := StartProgram(p.tools.Server, p.dir, p.dir, name, p.env, "start")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := p.createNamespace()
		if err == nil {
			return proc, nil
		}
		select {
		case <-proc.done:
			return nil, fmt.Errorf("the Temporal server exited: %v\n%s", proc.err, proc.Output())
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			proc.Stop()
			return nil, fmt.Errorf("the server on %s did not take the default namespace within 2 minutes: %v", p.Address, err)
		}
	}
}

// Dial connects to the server as the compose file's hosts do, with their certificate.
func (p *ProductionServer) Dial() (client.Client, error) { return p.dialWith(p.hosts) }

// dialWith connects with the client certificate in the folder dir (client.pem,
// client-key.pem, ca.pem), checking the server by its compose service name.
func (p *ProductionServer) dialWith(dir string) (client.Client, error) {
	profile := envconfig.ClientConfigProfile{Address: p.Address, Namespace: "default", TLS: &envconfig.ClientConfigTLS{
		ClientCertPath: filepath.Join(dir, "client.pem"), ClientKeyPath: filepath.Join(dir, "client-key.pem"),
		ServerCACertPath: filepath.Join(dir, "ca.pem"), ServerName: "temporal",
	}}
	co, err := profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return nil, err
	}
	co.Logger = quietLogger{}
	return client.Dial(co)
}

// createNamespace does what the namespace job does, with its client certificate.
func (p *ProductionServer) createNamespace() error {
	c, err := p.dialWith(p.control)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: "default", WorkflowExecutionRetentionPeriod: durationpb.New(7 * 24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace default: %w", err)
	}
	// The namespace is usable once the frontend's cache has it.
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err
}

// Logs names the files the database and the server write.
func (p *ProductionServer) Logs() []string {
	return []string{filepath.Join(p.dir, "temporal-server-*.stderr"), filepath.Join(p.dir, "postgres.stderr")}
}

// Stop stops PostgreSQL; the caller stops the server processes it started.
func (p *ProductionServer) Stop() { p.pg.Stop() }
