package starter

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"
)

// ConnectOptions override the Temporal SDK's environment configuration (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, and the TEMPORAL_PROFILE in the
// config file). Empty fields keep what the environment says.
type ConnectOptions struct {
	Address   string
	Namespace string
	Logger    log.Logger
}

// ClientOptions resolves the connection settings: flags over environment over profile file
// over defaults (127.0.0.1:7233, namespace "default").
func ClientOptions(opts ConnectOptions) (client.Options, error) {
	co, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, fmt.Errorf("read Temporal client settings from the environment: %w", err)
	}
	if opts.Address != "" {
		co.HostPort = opts.Address
	}
	if co.HostPort == "" {
		co.HostPort = client.DefaultHostPort
	}
	if opts.Namespace != "" {
		co.Namespace = opts.Namespace
	}
	if co.Namespace == "" {
		co.Namespace = client.DefaultNamespace
	}
	co.Logger = opts.Logger
	return co, nil
}

// Dial connects with resolved options and checks the connection, so a wrong address fails
// here with a clear message rather than later.
func Dial(ctx context.Context, co client.Options) (client.Client, error) {
	c, err := client.DialContext(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %q): %w", co.HostPort, co.Namespace, err)
	}
	return c, nil
}
