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

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
)

// MaxSecretBytes bounds a secret file: a certificate chain or a key, not a data file.
const MaxSecretBytes = 64 << 10

// fillSecrets returns env with each secret reference replaced by its value, read on this
// host at launch: from the folder of the worker's namespace and the cluster in the secrets
// folder (opened as an os.Root, so no path, link or .. leads out of it), or from the
// worker's variables named for the cluster (SecretEnv). The values go to the script, never
// back.
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
		v, ok := l.SecretEnv[ref.FromEnv]
		if !ok {
			return "", fmt.Errorf("the worker has no variable %s (a cluster reads only variables named for it)", spec.SecretEnvName(cluster, ref.FromEnv))
		}
		return v, nil
	}
	if l.SecretsDir == "" {
		return "", errors.New("this host has no secrets folder (agent --secrets-dir)")
	}
	dir, err := l.secretsFolder(cluster)
	if err != nil {
		return "", err
	}
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

// secretsFolder is the cluster's folder of secret files: <secrets>/<namespace>/<cluster>,
// so that no other namespace's cluster of the same name reads them. A folder of the layout
// before namespaces, <secrets>/<cluster>, is still read when the namespace has none, with
// a warning: any namespace's cluster of that name reads it.
func (l *Backend) secretsFolder(cluster string) (string, error) {
	if l.Namespace == "" || l.Namespace == "." || l.Namespace == ".." || strings.ContainsAny(l.Namespace, "/\x00") {
		return "", fmt.Errorf("this worker names no namespace to read secret files of (got %q)", l.Namespace)
	}
	dir := filepath.Join(l.SecretsDir, l.Namespace, cluster)
	if _, err := os.Stat(filepath.Join(l.SecretsDir, l.Namespace)); errors.Is(err, fs.ErrNotExist) {
		old := filepath.Join(l.SecretsDir, cluster)
		if _, err := os.Stat(old); err == nil {
			l.log().Warn("Reading secret files from the layout before namespaces; move them to the namespace's folder, which no other namespace reads",
				zap.String("folder", old), zap.String("move to", dir))
			return old, nil
		}
	}
	return dir, nil
}
