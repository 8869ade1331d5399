package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/logging"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// common are the flags every command has.
type common struct {
	taskQueue, logFormat, logLevel string
}

func (c *common) register(fs *pflag.FlagSet, defaultLogLevel string) {
	fs.StringVar(&c.taskQueue, "task-queue", workflows.DefaultTaskQueue, "Temporal task queue clusterflow workers poll")
	fs.StringVar(&c.logFormat, "log-format", "console", "log format on stderr: console or json")
	fs.StringVar(&c.logLevel, "log-level", defaultLogLevel, "log level: debug, info, warn or error")
}

func (c *common) logger() (*zap.Logger, error) {
	l, err := logging.New(c.logFormat, c.logLevel)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err)
	}
	return l, nil
}

// connection are the flags of commands that talk to an existing Temporal server.
type connection struct {
	common
	address, namespace string
	// codecKeyFile is absolute once connect has run.
	codecKeyFile string
	// metrics, when set before connect, receives the client's and workers' metrics.
	metrics client.MetricsHandler
	// dataConverter is the connected client's, set by connect.
	dataConverter converter.DataConverter
	// signKey, when set (--sign-key), is the key the commands that send a spec sign it with.
	signKey string
}

func (c *connection) register(fs *pflag.FlagSet, defaultLogLevel string) {
	c.common.register(fs, defaultLogLevel)
	fs.StringVar(&c.address, "address", "", "Temporal server host:port (default $TEMPORAL_ADDRESS, else 127.0.0.1:7233)")
	fs.StringVar(&c.namespace, "namespace", "", "Temporal namespace (default $TEMPORAL_NAMESPACE, else default)")
	codecKeyFlag(fs, &c.codecKeyFile)
}

// codecKeyFlag adds --codec-key-file, which defaults to $CLUSTERFLOW_CODEC_KEY_FILE.
func codecKeyFlag(fs *pflag.FlagSet, file *string) {
	fs.StringVar(file, "codec-key-file", os.Getenv(codec.KeyFileEnv), "encrypt every payload sent to Temporal with the first key of this file, and decrypt with any (lines of ID BASE64; make one with `clusterflow codec-key new ID`); default $"+codec.KeyFileEnv)
}

// absoluteKeyFile makes a key file's path absolute, so the agent, started elsewhere, reads the same file.
func absoluteKeyFile(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", apperr.Errorf(apperr.Invalid, "--codec-key-file: %v", err)
	}
	return abs, nil
}

// connect resolves the flags over the SDK's environment settings and dials Temporal. It
// returns the settings it used, so callers can tell which namespace they reached.
func (c *connection) connect(ctx context.Context, logger *zap.Logger) (client.Client, envconfig.ClientConfigProfile, error) {
	var err error
	if c.codecKeyFile, err = absoluteKeyFile(c.codecKeyFile); err != nil {
		return nil, envconfig.ClientConfigProfile{}, err
	}
	co, settings, err := starter.ClientOptions(starter.ConnectOptions{
		Address: c.address, Namespace: c.namespace, Logger: logging.SDK(logger), MetricsHandler: c.metrics,
		CodecKeyFile: c.codecKeyFile,
	})
	if err != nil {
		return nil, settings, apperr.Wrap(apperr.Invalid, err)
	}
	c.dataConverter = co.DataConverter
	cl, err := starter.Dial(ctx, co)
	return cl, settings, err
}

// starter connects and returns a Starter for the commands that act as a client.
func (c *connection) starter(ctx context.Context) (*starter.Starter, envconfig.ClientConfigProfile, func(), error) {
	logger, err := c.logger()
	if err != nil {
		return nil, envconfig.ClientConfigProfile{}, nil, err
	}
	var key signing.PrivateKey
	if c.signKey != "" {
		if key, err = signing.LoadPrivateKey(c.signKey); err != nil {
			return nil, envconfig.ClientConfigProfile{}, nil, apperr.Errorf(apperr.Invalid, "--sign-key: %v", err)
		}
	}
	cl, co, err := c.connect(ctx, logger)
	if err != nil {
		return nil, co, nil, err
	}
	st := starter.New(cl, c.taskQueue).WithDataConverter(c.dataConverter)
	if c.signKey != "" {
		st.SignWith(key, co.Namespace)
	}
	return st, co, cl.Close, nil
}

func newFlagSet(name, args string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: clusterflow %s %s\n\nFlags:\n%s", name, args, fs.FlagUsages())
	}
	return fs
}

// flagError marks a flag problem as bad input; help is not an error.
func flagError(err error) error {
	if err == pflag.ErrHelp {
		return err
	}
	return apperr.Wrap(apperr.Invalid, err)
}

// clusterCommand parses the flags of a command that acts on one cluster, takes its NAME,
// and connects; bad input is refused before connecting.
func clusterCommand(ctx context.Context, fs *pflag.FlagSet, conn *connection, args []string) (string, *starter.Starter, func(), error) {
	if err := fs.Parse(args); err != nil {
		return "", nil, nil, flagError(err)
	}
	name, err := oneName(fs, fs.Name())
	if err != nil {
		return "", nil, nil, err
	}
	st, _, closeClient, err := conn.starter(ctx)
	return name, st, closeClient, err
}

// onCluster runs a command that takes a cluster NAME and no flags of its own.
func onCluster(ctx context.Context, command string, args []string, do func(context.Context, *starter.Starter, string) error) error {
	fs := newFlagSet(command, "NAME")
	var conn connection
	conn.register(fs, "warn")
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	return do(ctx, st, name)
}

// waitFlags adds --wait, described by what, and --timeout.
func waitFlags(fs *pflag.FlagSet, what string) (wait *bool, timeout *time.Duration) {
	wait = fs.Bool("wait", false, what)
	timeout = fs.Duration("timeout", 0, "with --wait, give up waiting after this long (0 waits forever)")
	return wait, timeout
}

// specCommand parses a command's flags, then loads and validates the spec its -f names
// before connecting, so that an invalid spec starts nothing, server or not.
func specCommand(ctx context.Context, fs *pflag.FlagSet, conn *connection, file *string, args []string) (spec.Cluster, *starter.Starter, func(), error) {
	if err := fs.Parse(args); err != nil {
		return spec.Cluster{}, nil, nil, flagError(err)
	}
	if *file == "" {
		fs.Usage()
		return spec.Cluster{}, nil, nil, apperr.Errorf(apperr.Invalid, "-f SPEC is required")
	}
	c, err := spec.Load(*file)
	if err != nil {
		return spec.Cluster{}, nil, nil, err
	}
	st, _, closeClient, err := conn.starter(ctx)
	return c, st, closeClient, err
}

// oneName takes the single NAME argument of a command.
func oneName(fs *pflag.FlagSet, what string) (string, error) {
	if fs.NArg() != 1 {
		fs.Usage()
		return "", apperr.Errorf(apperr.Invalid, "%s takes exactly one cluster NAME, got %d arguments", what, fs.NArg())
	}
	return fs.Arg(0), nil
}

// outputFlag adds -o; pflag refuses values other than json and table.
func outputFlag(fs *pflag.FlagSet) *string {
	out := outputFormat("table")
	fs.VarP(&out, "output", "o", "output format: table or json")
	return (*string)(&out)
}

type outputFormat string

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(value string) error {
	if value != "json" && value != "table" {
		return fmt.Errorf("%q is not json or table", value)
	}
	*o = outputFormat(value)
	return nil
}
