package local

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
)

// MaxSecretBytes bounds a secret file: a certificate chain or a key, not a data file.
const MaxSecretBytes = 64 << 10

// fillSecrets returns env with each secret reference replaced by its value, read on this
// host at launch: from the cluster's own folder of the secrets folder (opened as an
// os.Root, so no path, link or .. leads out of it), or from the worker's
// CLUSTERFLOW_SECRET_ variables. The values go to the agent and the script, never back.
func (l *Backend) fillSecrets(cluster string, env map[string]string) (map[string]string, error) {
	var out map[string]string
	for _, name := range slices.Sorted(maps.Keys(env)) {
		value := env[name]
		if !strings.ContainsRune(value, 0) {
			continue
		}
		ref, ok := spec.ParseSecret(value)
		if !ok {
			return nil, &backend.SecretError{Name: name, Err: errors.New("a value with a NUL byte that is no secret reference")}
		}
		if err := ref.Check(); err != nil {
			return nil, &backend.SecretError{Name: name, Err: err}
		}
		secret, err := l.readSecret(cluster, ref)
		if err != nil {
			return nil, &backend.SecretError{Name: name, Err: err}
		}
		if out == nil {
			out = maps.Clone(env)
		}
		out[name] = secret
	}
	if out == nil {
		return env, nil
	}
	return out, nil
}

func (l *Backend) readSecret(cluster string, ref spec.SecretRef) (string, error) {
	if ref.FromEnv != "" {
		v, ok := os.LookupEnv(spec.SecretEnvPrefix + ref.FromEnv)
		if !ok {
			return "", fmt.Errorf("the worker has no variable %s%s", spec.SecretEnvPrefix, ref.FromEnv)
		}
		return v, nil
	}
	if l.SecretsDir == "" {
		return "", errors.New("this host has no secrets folder (worker --secrets-dir)")
	}
	dir := filepath.Join(l.SecretsDir, cluster)
	full := filepath.Join(dir, filepath.FromSlash(ref.FromFile))
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", full, unwrapPath(err))
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(ref.FromFile))
	if err != nil {
		return "", fmt.Errorf("%s: %w", full, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", full, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s: not a regular file", full)
	case fi.Mode().Perm()&0o077 != 0:
		// As ssh does with keys: a secret others can read is no longer one.
		return "", fmt.Errorf("%s: readable by others (mode %04o); make it 0600 or 0400", full, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", full, err)
	case len(data) > MaxSecretBytes:
		return "", fmt.Errorf("%s: over %d bytes", full, MaxSecretBytes)
	case strings.ContainsRune(string(data), 0):
		return "", fmt.Errorf("%s: contains a NUL byte, which no environment variable can hold", full)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

// unwrapPath drops the path an fs error repeats, for "FILE: no such file or directory".
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
