package starter

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"

	"github.com/clusterflow/clusterflow/internal/codec"
)

// ConnectOptions override the Temporal SDK's environment configuration (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, and the TEMPORAL_PROFILE in the
// config file). Empty fields keep what the environment says.
type ConnectOptions struct {
	Address   string
	Namespace string
	Logger    log.Logger
	// MetricsHandler, if set, receives the client's and its workers' metrics.
	MetricsHandler client.MetricsHandler
	// CodecKeyFile names clusterflow's codec keys (one "ID BASE64" a line, owner-only):
	// every payload is then encrypted with the first and decrypted with any. Empty: payloads
	// go as they are, and an encrypted one read is an error that says a key is needed.
	CodecKeyFile string
}

// Settings resolves the connection settings: flags over environment over profile file
// over defaults (127.0.0.1:7233, namespace "default"). A server given no TLS or API key is
// reached with the client certificate `clusterflow dev` keeps for its address, when it is
// this user's dev (DevProfilePath). The result is plain data, so it can be handed on, as
// workers do to the agent that completes script activities.
func Settings(opts ConnectOptions) (envconfig.ClientConfigProfile, error) {
	p, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{})
	if err != nil {
		return p, fmt.Errorf("read Temporal client settings from the environment: %w", err)
	}
	if opts.Address != "" {
		p.Address = opts.Address
	}
	if p.Address == "" {
		p.Address = client.DefaultHostPort
	}
	if opts.Namespace != "" {
		p.Namespace = opts.Namespace
	}
	if p.Namespace == "" {
		p.Namespace = client.DefaultNamespace
	}
	if p.TLS == nil && p.APIKey == "" {
		if p.TLS, err = devProfileTLS(p.Address); err != nil {
			return p, err
		}
	}
	return p, nil
}

// ClientOptions resolves the settings and turns them into client options.
func ClientOptions(opts ConnectOptions) (client.Options, envconfig.ClientConfigProfile, error) {
	p, err := Settings(opts)
	if err != nil {
		return client.Options{}, p, err
	}
	// A codec the operator configured (TEMPORAL_CODEC_ENDPOINT, or a profile's [codec])
	// encodes every payload this client sends and decodes what it reads.
	co, err := p.ToClientOptions(envconfig.ToClientOptionsRequest{IncludeRemoteCodec: true})
	if err != nil {
		return co, p, fmt.Errorf("Temporal client settings: %w", err)
	}
	co.Logger = opts.Logger
	co.MetricsHandler = opts.MetricsHandler
	return co, p, codec.Apply(&co, opts.CodecKeyFile)
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
