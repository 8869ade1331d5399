package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

func TestSecretsAreFilledInFromTheClustersOwnFolder(t *testing.T) {
	secrets := t.TempDir()
	own := filepath.Join(secrets, "c")
	if err := os.MkdirAll(filepath.Join(own, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("c/db/password", "s3cret\n", 0o600)
	write("c/open", "visible", 0o644)
	write("other-password", "theirs", 0o600)
	if err := os.Symlink(filepath.Join(secrets, "other-password"), filepath.Join(own, "link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(spec.SecretEnvPrefix+"API_TOKEN", "tok")
	t.Setenv("TEMPORAL_API_KEY", "never")
	l := &Backend{SecretsDir: secrets}

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
		{spec.SecretRef{FromEnv: "TEMPORAL_API_KEY"}.Encode(), "the worker has no variable CLUSTERFLOW_SECRET_TEMPORAL_API_KEY"},
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
}
