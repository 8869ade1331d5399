package signing

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

func testSpec() spec.Cluster {
	return spec.Cluster{Name: "c", Roles: []spec.Role{
		{Name: "w", Members: 2, ScriptHash: strings.Repeat("a", 64), Env: map[string]string{"A": "1"}, Events: spec.AllEvents},
	}}
}

func runOf(c spec.Cluster, namespace string, event spec.Event) Run {
	r := c.Roles[0]
	return Run{Cluster: c.Name, Namespace: namespace, Role: r.Name, Script: r.ScriptHash, Env: spec.EnvHash(r.Env), Event: event}
}

// A host runs what a trusted key signed, and refuses, saying why, what it did not: an
// unsigned spec, an unknown key, a spec changed after signing, another namespace, an env
// value changed with the old signature kept, an event the signed spec does not list.
func TestAHostRunsOnlyWhatATrustedKeySigned(t *testing.T) {
	alice, err := NewKey("alice")
	if err != nil {
		t.Fatal(err)
	}
	mallory, _ := NewKey("mallory")
	trusted := Trusted{"alice": alice.key.Public().(ed25519.PublicKey)}
	c := testSpec()
	signed := Signed{Manifest: ManifestOf(c, "ns"), Signature: *alice.Sign(ManifestOf(c, "ns"))}
	if err := trusted.Check([]Signed{signed}, runOf(c, "ns", spec.EventConfigure)); err != nil {
		t.Fatalf("the signed spec: %v", err)
	}

	changed := testSpec()
	changed.Roles[0].Env = map[string]string{"A": "2"}
	tampered := Signed{Manifest: ManifestOf(changed, "ns"), Signature: signed.Signature}
	byMallory := Signed{Manifest: ManifestOf(c, "ns"), Signature: *mallory.Sign(ManifestOf(c, "ns"))}
	for _, tc := range []struct {
		name   string
		signed []Signed
		run    Run
		want   string
	}{
		{"unsigned", nil, runOf(c, "ns", spec.EventConfigure), "unsigned spec"},
		{"unknown key", []Signed{byMallory}, runOf(c, "ns", spec.EventConfigure), `signature by unknown key "mallory"`},
		{"tampered", []Signed{tampered}, runOf(changed, "ns", spec.EventConfigure), "does not match the spec"},
		{"new env, old signature", []Signed{signed}, runOf(changed, "ns", spec.EventConfigure), "role w's env is not the one key \"alice\" signed"},
		{"another namespace", []Signed{signed}, runOf(c, "other", spec.EventConfigure), `for namespace "ns", not "other"`},
		{"an event not signed", []Signed{signed}, runOf(c, "ns", spec.EventStart), "do not include start"},
		{"tampered, beside the spec signed before", []Signed{tampered, signed}, runOf(changed, "ns", spec.EventConfigure),
			"does not match the spec it came with (changed after it was signed); and before it, role w's env is not the one key \"alice\" signed"},
	} {
		err := trusted.Check(tc.signed, tc.run)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// An action runs only if the signed manifest lists it; a manifest of roles without
	// actions reads exactly as one signed before actions existed.
	if data := ManifestOf(c, "ns").message(); strings.Contains(string(data), "actions") {
		t.Errorf("a manifest without actions mentions them: %s", data)
	}
	withAction := testSpec()
	withAction.Roles[0].Actions = []string{"backup"}
	signedAction := Signed{Manifest: ManifestOf(withAction, "ns"), Signature: *alice.Sign(ManifestOf(withAction, "ns"))}
	backup := runOf(withAction, "ns", "backup")
	backup.Action = "backup"
	if err := trusted.Check([]Signed{signedAction}, backup); err != nil {
		t.Errorf("a signed action: %v", err)
	}
	compact := runOf(withAction, "ns", "compact")
	compact.Action = "compact"
	if err := trusted.Check([]Signed{signedAction}, compact); err == nil || !strings.Contains(err.Error(), "do not include compact") {
		t.Errorf("an action the manifest does not list: %v", err)
	}
	if err := trusted.Check([]Signed{signed}, backup); err == nil || !strings.Contains(err.Error(), "do not include backup") {
		t.Errorf("an action under a manifest signed without it: %v", err)
	}
	// An older signed spec still covers what it signed, beside a newer tampered one.
	if err := trusted.Check([]Signed{tampered, signed}, runOf(c, "ns", spec.EventTeardown)); err != nil {
		t.Errorf("a run the older signed spec covers: %v", err)
	}
}

// Keys round-trip through their files; a private key others may read, a trusted-keys file
// others may write, and malformed lines are refused with the reason.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k, err := NewKey("ops@example")
	if err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(dir, "ops.key")
	if err := os.WriteFile(priv, k.File(), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadPrivateKey(priv)
	if err != nil || loaded.PublicLine() != k.PublicLine() {
		t.Fatalf("loaded %v, %v", loaded.PublicLine(), err)
	}
	pub := filepath.Join(dir, "trusted")
	if err := os.WriteFile(pub, []byte("# the ops team\n"+k.PublicLine()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trusted, err := LoadTrusted(pub)
	if err != nil {
		t.Fatal(err)
	}
	m := ManifestOf(testSpec(), "ns")
	if err := trusted.Verify(Signed{Manifest: m, Signature: *loaded.Sign(m)}); err != nil {
		t.Errorf("a signature by the loaded key: %v", err)
	}
	for _, tc := range []struct {
		file, content string
		mode          os.FileMode
		load          func(string) error
		want          string
	}{
		{"open.key", string(k.File()), 0o644, func(p string) error { _, err := LoadPrivateKey(p); return err }, "chmod 600"},
		{"open-trusted", k.PublicLine() + "\n", 0o666, func(p string) error { _, err := LoadTrusted(p); return err }, "chmod 644"},
		{"empty-trusted", "# none\n", 0o644, func(p string) error { _, err := LoadTrusted(p); return err }, "no keys"},
		{"twice", k.PublicLine() + "\n" + k.PublicLine() + "\n", 0o644, func(p string) error { _, err := LoadTrusted(p); return err }, "used twice"},
		{"bad-name", "a/b ed25519 AAAA\n", 0o644, func(p string) error { _, err := LoadTrusted(p); return err }, "key name"},
		{"private-as-trusted", string(k.File()), 0o644, func(p string) error { _, err := LoadTrusted(p); return err }, "want NAME ed25519 BASE64"},
	} {
		p := filepath.Join(dir, tc.file)
		if err := os.WriteFile(p, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, tc.mode)
		if err := tc.load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
}
