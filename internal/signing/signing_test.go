package signing

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
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

// Signed with claims (the namespace's ID and the generation), a manifest binds them: a
// member is set up (configure, upgrade) only under the newest generation the host was sent,
// signed, so an unsigned change sets up nothing and an upgrade never goes back to an older
// signed script; what members run already goes on under any signed generation; another
// namespace's ID is refused; and an action's parameters are those its signed schema names.
func TestSignedGenerationsBindWhatIsSetUp(t *testing.T) {
	alice, err := NewKey("alice")
	if err != nil {
		t.Fatal(err)
	}
	trusted := Trusted{"alice": alice.key.Public().(ed25519.PublicKey)}
	signedAt := func(c spec.Cluster, generation int) Signed {
		c.Signature = &spec.Signature{NamespaceID: "ns-id", Generation: generation}
		m := ManifestOf(c, "ns")
		return Signed{Manifest: m, Signature: *alice.Sign(m)}
	}
	unsignedAt := func(c spec.Cluster, generation int) Signed {
		m := ManifestOf(c, "ns")
		m.Generation = generation
		return Signed{Manifest: m}
	}
	a := testSpec()
	a.Roles[0].Events = append(slices.Clone(spec.AllEvents), spec.EventUpgrade)
	b := testSpec()
	b.Roles[0].Events = a.Roles[0].Events
	b.Roles[0].ScriptHash = strings.Repeat("b", 64)
	b.Roles[0].Actions = []string{"restore", "backup"}
	b.Roles[0].ActionParams = map[string]map[string]string{"restore": {"snapshot": "[a-z0-9-]{1,32}"}}
	resized := b
	resized.Roles = append([]spec.Role(nil), b.Roles...)
	resized.Roles[0].Members = 9
	run := func(c spec.Cluster, event spec.Event) Run {
		r := runOf(c, "ns", event)
		r.NamespaceID = "ns-id"
		return r
	}
	action := func(name string, params ...string) Run {
		r := run(b, spec.Event(name))
		r.Action, r.Params = name, params
		return r
	}
	signed := []Signed{signedAt(b, 7), signedAt(a, 3)}
	withUnsigned := append([]Signed{unsignedAt(resized, 8)}, signed...)
	for _, tc := range []struct {
		name   string
		signed []Signed
		run    Run
		want   string // "" runs
	}{
		{"configure under the newest", signed, run(b, spec.EventConfigure), ""},
		{"upgrade back to an older signed script", signed, run(a, spec.EventUpgrade), "of generation 3, and generation 7 is newer"},
		{"configure with an older signed script", signed, run(a, spec.EventConfigure), "of generation 3, and generation 7 is newer"},
		{"what a member on the older script runs", signed, run(a, spec.EventAddNodes), ""},
		{"its teardown", signed, run(a, spec.EventTeardown), ""},
		{"configure after an unsigned change", withUnsigned, run(resized, spec.EventConfigure), "unsigned spec (generation 8)"},
		{"a notification after it", withUnsigned, run(b, spec.EventDelNodes), ""},
		{"another namespace of the same name", signed, func() Run { r := run(b, spec.EventConfigure); r.NamespaceID = "elsewhere"; return r }(), "namespace of ID ns-id, not this one's (elsewhere)"},
		{"a parameter its schema names", signed, action("restore", "snapshot=nightly-1"), ""},
		{"a value its pattern refuses", signed, action("restore", "snapshot=../../etc"), `parameter snapshot="../../etc" does not match`},
		{"a parameter its schema does not name", signed, action("restore", "target=x"), `takes no parameter "target" (it takes snapshot)`},
		{"a parameter of an action without a schema", signed, action("backup", "x=1"), `takes no parameter "x" (it takes none)`},
	} {
		err := trusted.Check(tc.signed, tc.run)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if got := trusted.NewestSigned(withUnsigned); got != 7 {
		t.Errorf("the newest signed generation: %d, want 7 (8 is unsigned)", got)
	}
}

// A signature covers how members run (their container, limits and probe) once it says so:
// a changed image, or privileges asked for, under such a signature sets no member up; a
// spec signed before it covered containers sets up no member in one; what members already
// run goes on, and a role without a container runs under either kind of signature.
func TestASignatureCoversHowMembersRun(t *testing.T) {
	alice, err := NewKey("alice")
	if err != nil {
		t.Fatal(err)
	}
	trusted := Trusted{"alice": alice.key.Public().(ed25519.PublicKey)}
	boxed := testSpec()
	boxed.Roles[0].Container = spec.Container{Image: "registry/app:1"}
	runOfBoxed := func(c spec.Cluster, event spec.Event) Run {
		run := runOf(c, "ns", event)
		container := c.Roles[0].Container
		run.Runtime, run.Container = spec.RuntimeHash(&container, c.Roles[0].Limits, nil), true
		return run
	}
	boxed.Signature = &spec.Signature{Runtime: true}
	covered := Signed{Manifest: ManifestOf(boxed, "ns"), Signature: *alice.Sign(ManifestOf(boxed, "ns"))}
	if err := trusted.Check([]Signed{covered}, runOfBoxed(boxed, spec.EventConfigure)); err != nil {
		t.Fatalf("the signed container: %v", err)
	}
	for name, change := range map[string]func(*spec.Container){
		"another image": func(c *spec.Container) { c.Image = "evil/app:1" },
		"privileged":    func(c *spec.Container) { c.Privileged = true },
		"root":          func(c *spec.Container) { c.User = "0" },
		"a volume":      func(c *spec.Container) { c.Volumes = []string{"/host"} },
	} {
		changed := testSpec()
		changed.Roles[0].Container = boxed.Roles[0].Container
		change(&changed.Roles[0].Container)
		err := trusted.Check([]Signed{covered}, runOfBoxed(changed, spec.EventConfigure))
		if err == nil || !strings.Contains(err.Error(), "are not those key \"alice\" signed") {
			t.Errorf("%s under the signature of the image: %v", name, err)
		}
		if err := trusted.Check([]Signed{covered}, runOfBoxed(changed, spec.EventAddNodes)); err != nil {
			t.Errorf("%s: a restart of what members run: %v", name, err)
		}
	}
	boxed.Signature = nil
	before := Signed{Manifest: ManifestOf(boxed, "ns"), Signature: *alice.Sign(ManifestOf(boxed, "ns"))}
	if err := trusted.Check([]Signed{before}, runOfBoxed(boxed, spec.EventConfigure)); err == nil || !strings.Contains(err.Error(), "before signatures covered containers") {
		t.Errorf("a container under a signature of before: %v", err)
	}
	plain := testSpec()
	plainBefore := Signed{Manifest: ManifestOf(plain, "ns"), Signature: *alice.Sign(ManifestOf(plain, "ns"))}
	if err := trusted.Check([]Signed{plainBefore}, runOf(plain, "ns", spec.EventConfigure)); err != nil {
		t.Errorf("a role without a container under a signature of before: %v", err)
	}
	if m := ManifestOf(plain, "ns"); m.RuntimeSigned || m.Roles[0].Runtime != "" {
		t.Errorf("a spec signed before runtime claims made a manifest %+v: older signatures would no longer verify", m)
	}
}
