package agent

import (
	"fmt"
	"os"
	"strings"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/keyfile"
)

// maxConnectionFile bounds a certificate, key or codec key file read into a connection.
const maxConnectionFile = 1 << 20

// Inline reads the files the connection names (TLS certificates and keys, codec keys) into
// it, as the worker's user, and names none: what goes to the agent is what this user may
// read, whoever the agent runs as.
func (c Connection) Inline() (Connection, error) {
	if tls := c.TLS; tls != nil {
		t := *tls
		for _, f := range []struct {
			path *string
			data *[]byte
			what string
		}{
			{&t.ClientCertPath, &t.ClientCertData, "TLS client certificate"},
			{&t.ClientKeyPath, &t.ClientKeyData, "TLS client key"},
			{&t.ServerCACertPath, &t.ServerCACertData, "TLS server CA certificate"},
		} {
			if *f.path == "" {
				continue
			}
			data, err := readBounded(*f.path, f.what)
			if err != nil {
				return c, err
			}
			*f.data, *f.path = data, ""
		}
		c.TLS = &t
	}
	if c.CodecKeyFile != "" {
		data, err := keyfile.ReadPrivate(c.CodecKeyFile, "codec key file", maxConnectionFile)
		if err != nil {
			return c, err
		}
		if _, err := codec.ParseKeys(data); err != nil {
			return c, fmt.Errorf("codec key file %s: %w", c.CodecKeyFile, err)
		}
		c.CodecKeys, c.CodecKeyFile = string(data), ""
	}
	return c, nil
}

// namedFiles lists the files a connection names rather than carries.
func (c Connection) namedFiles() []string {
	var files []string
	if tls := c.TLS; tls != nil {
		for _, p := range []string{tls.ClientCertPath, tls.ClientKeyPath, tls.ServerCACertPath} {
			if p != "" {
				files = append(files, p)
			}
		}
	}
	if c.CodecKeyFile != "" {
		files = append(files, c.CodecKeyFile)
	}
	return files
}

// refuseNamedFiles refuses a caller's connection that names files for the agent to read.
func (c Connection) refuseNamedFiles() error {
	if files := c.namedFiles(); len(files) > 0 {
		return &RefusedError{Reason: fmt.Sprintf("the connection names files (%s): a worker sends their content (Connection.Inline), as the agent reads no file a caller names", strings.Join(files, ", "))}
	}
	return nil
}

func readBounded(path, what string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if info.Size() > maxConnectionFile {
		return nil, fmt.Errorf("%s %s: %d bytes, more than such a file holds", what, path, info.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return data, nil
}
