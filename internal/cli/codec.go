package cli

import (
	"context"
	"fmt"
	"net"
	"strings"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/codecserver"
	"github.com/clusterflow/clusterflow/internal/gateway"
)

// runCodecServer serves the codec for Temporal's Web UI and CLI (--codec-endpoint).
func runCodecServer(ctx context.Context, args []string) error {
	fs := newFlagSet("codec-server", "--codec-key-file FILE [--listen 127.0.0.1:8089] [--allowed-origins URL,...] [--tokens-file F]")
	var com common
	com.register(fs, "info")
	var keyFile string
	codecKeyFlag(fs, &keyFile)
	listen := fs.String("listen", "127.0.0.1:8089", "address to serve HTTP on")
	origins := fs.String("allowed-origins", "", "comma list of the Web UIs' origins (scheme://host:port) that may call it from a browser; requests from any other origin are refused")
	tokensFile := fs.String("tokens-file", "", "require 'Authorization: Bearer TOKEN' of scope codec (the gateway's token file: see `clusterflow gateway token NAME --scope codec`)")
	certFile := fs.String("tls-cert", "", "TLS certificate file (with --tls-key)")
	tlsKeyFile := fs.String("tls-key", "", "TLS key file (with --tls-cert)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "codec-server takes no arguments, got %q", fs.Args())
	}
	if keyFile == "" {
		return apperr.Errorf(apperr.Invalid, "--codec-key-file: required (or $%s)", codec.KeyFileEnv)
	}
	if (*certFile == "") != (*tlsKeyFile == "") {
		return apperr.Errorf(apperr.Invalid, "--tls-cert and --tls-key: give both or neither")
	}
	keys, err := codec.LoadKeys(keyFile)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	opts := codecserver.Options{AllowedOrigins: commaList(*origins)}
	if *tokensFile != "" {
		if opts.Tokens, err = gateway.ReadTokens(*tokensFile); err != nil {
			return apperr.Wrap(apperr.Invalid, err)
		}
	}
	if err := opts.Check(); err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	if opts.Logger, err = com.logger(); err != nil {
		return err
	}
	if *tokensFile == "" && !gateway.IsLoopback(*listen) {
		return apperr.Errorf(apperr.Invalid, "--listen %s: a codec server decrypts for whoever reaches it; off loopback it needs --tokens-file", *listen)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "--listen %s: %w", *listen, err)
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	opts.Logger.Info("Codec server serving", zap.String("url", fmt.Sprintf("%s://%s", scheme, ln.Addr())),
		zap.Strings("keys", keys.IDs()), zap.Strings("allowedOrigins", opts.AllowedOrigins), zap.Int("tokens", len(opts.Tokens)))
	return gateway.Serve(ctx, ln, codecserver.Handler(keys, opts), *certFile, *tlsKeyFile)
}

// runCodecKey prints a new key's line for a key file.
func runCodecKey(_ context.Context, args []string) error {
	fs := newFlagSet("codec-key", "new ID")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 2 || fs.Arg(0) != "new" {
		fs.Usage()
		return apperr.Errorf(apperr.Invalid, "codec-key: use `codec-key new ID`")
	}
	line, err := codec.NewKeyLine(fs.Arg(1))
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	fmt.Println(line)
	return nil
}

// commaList splits a comma list, dropping empty items.
func commaList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
