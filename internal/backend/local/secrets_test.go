package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/spec"
)

func TestSecretsAreFilledInFromTheClustersOwnFolder(t *testing.T) {
	secrets := t.TempDir()
	own := filepath.Join(secrets, "ns", "c")
	if err := os.MkdirAll(filepath.Join(own, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("ns/c/db/password", "s3cret\n", 0o600)
	write("ns/c/open", "visible", 0o644)
	write("other-password", "theirs", 0o600)
	if err := os.Symlink(filepath.Join(secrets, "other-password"), filepath.Join(own, "link")); err != nil {
		t.Fatal(err)
	}
	// The worker sends the variables named for the launch's cluster alone.
	environ := []string{spec.SecretEnvName("c", "API_TOKEN") + "=tok", spec.SecretEnvName("c-d", "API_TOKEN") + "=another's",
		spec.SecretEnvPrefix + "API_TOKEN=any cluster's", "TEMPORAL_API_KEY=never"}
	l := &Backend{SecretsDir: secrets, Namespace: "ns", SecretEnv: agent.SecretEnvOf("c", environ)}
	if len(l.SecretEnv) != 1 {
		t.Errorf("cluster c may read %v; want API_TOKEN alone", l.SecretEnv)
	}

	got, err := l.fillSecrets("c", map[string]string{
		"PLAIN":       "x",
		"DB_PASSWORD": spec.SecretRef{FromFile: "db/password"}.Encode(),
		"TOKEN":       spec.SecretRef{FromEnv: "API_TOKEN"}.Encode(),
	})
	if err != nil || got["PLAIN"] != "x" || got["DB_PASSWORD"] != "s3cret" || got["TOKEN"] != "tok" {
		t.Fatalf("filled in: %q, %v", got, err)
	}
	for _, tc := range []struct {
		value, says string
	}{
		{spec.SecretRef{FromFile: "missing"}.Encode(), "secret S: " + filepath.Join(own, "missing") + ": no such file or directory"},
		{spec.SecretRef{FromFile: "open"}.Encode(), "readable by others (mode 0644)"},
		{spec.SecretRef{FromFile: "link"}.Encode(), "secret S: " + filepath.Join(own, "link")},
		{"\x00fromFile:../other-password", "must be a plain path"},
		{spec.SecretRef{FromEnv: "TEMPORAL_API_KEY"}.Encode(), "the worker has no variable CLUSTERFLOW_SECRET_C__TEMPORAL_API_KEY"},
		{"a\x00b", "a value with a NUL byte that is no secret reference"},
	} {
		got, err := l.fillSecrets("c", map[string]string{"S": tc.value})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %q, %v; want an error saying %q", tc.value, got, err, tc.says)
		}
	}
	if _, err := (&Backend{}).fillSecrets("c", map[string]string{"S": spec.SecretRef{FromFile: "x"}.Encode()}); err == nil || !strings.Contains(err.Error(), "no secrets folder") {
		t.Errorf("without a secrets folder: %v", err)
	}
	// Another namespace's cluster of the same name reads none of them, even with no folder
	// of its own, once the folder is laid out by namespace.
	other := &Backend{SecretsDir: secrets, Namespace: "other"}
	if got, err := other.fillSecrets("c", map[string]string{"S": spec.SecretRef{FromFile: "db/password"}.Encode()}); err == nil {
		t.Errorf("namespace other read namespace ns's secret: %q", got)
	}
}

// A secrets folder of the layout before namespaces, <secrets>/<cluster>/, is still read by
// a namespace with no folder of its own.
func TestSecretsOfTheLayoutBeforeNamespacesAreStillRead(t *testing.T) {
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "c", "password"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &Backend{SecretsDir: secrets, Namespace: "ns"}
	if got, err := l.fillSecrets("c", map[string]string{"S": spec.SecretRef{FromFile: "password"}.Encode()}); err != nil || got["S"] != "old" {
		t.Errorf("the old layout: %q, %v", got, err)
	}
}
