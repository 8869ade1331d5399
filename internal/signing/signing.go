// Package signing signs cluster specs, as BOSH's director signs what its agents run, so a
// host started with --trusted-keys runs only what a key it trusts signed, whoever can write
// to the Temporal namespace.
//
// A signature covers a spec's manifest: the cluster's name, the namespace it was signed
// for (by name, and by ID), the generation the change it came with makes, and for each
// role its name, member count, startscript (SHA-256), env (names and values, by
// spec.EnvHash; secret references as references), events, actions and their parameters'
// schemas. A host checks a run against the manifests it was sent (see Trusted.Check): a
// member is set up only under the newest manifest, signed, so an unsigned change (a
// resize's counts) sets up no member and an upgrade goes to the newest signed spec alone,
// never back to an older one; what members already run may go on under any manifest a
// trusted key signed.
package signing

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/keyfile"
	"github.com/clusterflow/clusterflow/spec"
)

// Manifest is what a signature covers.
type Manifest struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	// NamespaceID and Generation are the signer's claims (spec.Signature): the namespace
	// by its ID, and the generation the change makes. Manifests signed before them have
	// neither, and read as before.
	NamespaceID string `json:"namespaceId,omitempty"`
	Generation  int    `json:"generation,omitempty"`
	// RuntimeSigned says each role's Runtime is covered (the claim spec.Signature.Runtime):
	// "" then means the role sets none of it.
	RuntimeSigned bool `json:"runtimeSigned,omitempty"`
	// SignedAt is the signer's claim of when (spec.Signature.SignedAt).
	SignedAt time.Time `json:"signedAt,omitzero"`
	Roles    []Role    `json:"roles"`
}

// Role is a role as its manifest has it.
type Role struct {
	Name    string       `json:"name"`
	Members int          `json:"members"`
	Script  string       `json:"script"`
	Env     string       `json:"env,omitempty"`
	Events  []spec.Event `json:"events"`
	// Actions are left out when a role declares none, so that manifests signed before
	// actions read the same.
	Actions []string `json:"actions,omitempty"`
	// ActionParams are the actions' parameter schemas (spec.Role.ActionParams).
	ActionParams map[string]map[string]string `json:"actionParams,omitempty"`
	// Runtime is how its members run (spec.Role.RuntimeHash), when the manifest covers it.
	Runtime string `json:"runtime,omitempty"`
}

// ManifestOf is a spec's manifest in a namespace, with the claims of its signature (its
// namespace ID and generation), if it has one. It is a pure function of the spec, so the
// signer and the workflow that forwards the signature to hosts agree on it.
func ManifestOf(c spec.Cluster, namespace string) Manifest {
	m := Manifest{Cluster: c.Name, Namespace: namespace, Roles: []Role{}}
	if c.Signature != nil {
		m.NamespaceID, m.Generation, m.RuntimeSigned, m.SignedAt = c.Signature.NamespaceID, c.Signature.Generation, c.Signature.Runtime, c.Signature.SignedAt
	}
	for _, r := range c.Roles {
		role := Role{Name: r.Name, Members: r.Members, Script: r.ScriptHash, Env: spec.EnvHash(r.Env),
			Events: slices.Clone(r.Events), Actions: slices.Clone(r.Actions), ActionParams: r.ActionParams}
		if m.RuntimeSigned {
			role.Runtime = r.RuntimeHash()
		}
		m.Roles = append(m.Roles, role)
	}
	return m
}

// message is what is signed: the manifest's JSON under a label that no other use of the
// key shares (v2 once it makes claims, which v1 manifests had none of).
func (m Manifest) message() []byte {
	data, _ := json.Marshal(m) // plain strings and ints always encode
	label := "clusterflow signed spec v1\n"
	switch {
	case m.RuntimeSigned || !m.SignedAt.IsZero():
		label = "clusterflow signed spec v3\n"
	case m.NamespaceID != "" || m.Generation != 0:
		label = "clusterflow signed spec v2\n"
	}
	return append([]byte(label), data...)
}

// Signed is a manifest with the signature its spec carried: what a host keeps and checks.
type Signed struct {
	Manifest  Manifest       `json:"manifest"`
	Signature spec.Signature `json:"signature"`
}

// Hash names a Signed among a cluster's files.
func (s Signed) Hash() string {
	data, _ := json.Marshal(s)
	return spec.ContentHash(data)
}

var validName = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("key name %q must be 1 to 64 of A-Z a-z 0-9 . _ @ -", name)
	}
	return nil
}

// PrivateKey is a named signing key.
type PrivateKey struct {
	Name string
	key  ed25519.PrivateKey
}

// maxKeyFile bounds what is read of a key file: a private key is one line, a trusted-keys
// file a line per key.
const maxKeyFile = 1 << 20

const (
	privateKind = "ed25519-private"
	publicKind  = "ed25519"
)

// NewKey makes a random signing key.
func NewKey(name string) (PrivateKey, error) {
	if err := checkName(name); err != nil {
		return PrivateKey{}, err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	return PrivateKey{Name: name, key: key}, err
}

// File is the key's private key file: "NAME ed25519-private BASE64-SEED".
func (k PrivateKey) File() []byte {
	return []byte(fmt.Sprintf("%s %s %s\n", k.Name, privateKind, base64.StdEncoding.EncodeToString(k.key.Seed())))
}

// PublicLine is the key's line for a host's --trusted-keys file: "NAME ed25519 BASE64".
func (k PrivateKey) PublicLine() string {
	return fmt.Sprintf("%s %s %s", k.Name, publicKind, base64.StdEncoding.EncodeToString(k.key.Public().(ed25519.PublicKey)))
}

// Sign signs the manifest; the signature carries the manifest's claims, which the workflow
// builds the same manifest from.
func (k PrivateKey) Sign(m Manifest) *spec.Signature {
	return &spec.Signature{Key: k.Name, Value: ed25519.Sign(k.key, m.message()), NamespaceID: m.NamespaceID, Generation: m.Generation,
		Runtime: m.RuntimeSigned, SignedAt: m.SignedAt}
}

// LoadPrivateKey reads a private key file, which must be its owner's alone.
func LoadPrivateKey(path string) (PrivateKey, error) {
	data, err := keyfile.ReadPrivate(path, "signing key", maxKeyFile)
	if err != nil {
		return PrivateKey{}, err
	}
	lines, err := keyLines(data, privateKind)
	switch {
	case err != nil:
		return PrivateKey{}, fmt.Errorf("signing key %s: %w", path, err)
	case len(lines) != 1:
		return PrivateKey{}, fmt.Errorf("signing key %s: holds %d keys, want one (make one with `clusterflow keys new NAME`)", path, len(lines))
	case len(lines[0].raw) != ed25519.SeedSize:
		return PrivateKey{}, fmt.Errorf("signing key %s: not an ed25519 private key", path)
	}
	return PrivateKey{Name: lines[0].name, key: ed25519.NewKeyFromSeed(lines[0].raw)}, nil
}

type keyLine struct {
	name string
	raw  []byte
}

// keyLines reads "NAME KIND BASE64" lines; # starts a comment.
func keyLines(data []byte, kind string) ([]keyLine, error) {
	var lines []keyLine
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 || fields[1] != kind {
			return nil, fmt.Errorf("line %d: want NAME %s BASE64", n, kind)
		}
		if err := checkName(fields[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if seen[fields[0]] {
			return nil, fmt.Errorf("line %d: key name %q is used twice", n, fields[0])
		}
		seen[fields[0]] = true
		raw, err := base64.StdEncoding.DecodeString(fields[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s is not base64", n, fields[0])
		}
		lines = append(lines, keyLine{name: fields[0], raw: raw})
	}
	return lines, sc.Err()
}

// Trusted are the public keys a host trusts, by name.
type Trusted map[string]ed25519.PublicKey

// LoadTrusted reads a --trusted-keys file: the lines `clusterflow keys new` prints. No one
// but its owner may write it.
func LoadTrusted(path string) (Trusted, error) {
	data, err := keyfile.ReadPublic(path, "trusted keys file", maxKeyFile)
	if err != nil {
		return nil, err
	}
	lines, err := keyLines(data, publicKind)
	if err == nil && len(lines) == 0 {
		err = fmt.Errorf("no keys in it (each line is one `clusterflow keys new NAME` printed)")
	}
	if err != nil {
		return nil, fmt.Errorf("trusted keys file %s: %w", path, err)
	}
	t := Trusted{}
	for _, l := range lines {
		if len(l.raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("trusted keys file %s: key %s is not an ed25519 public key", path, l.name)
		}
		t[l.name] = l.raw
	}
	return t, nil
}

// Verify checks a manifest's signature.
func (t Trusted) Verify(s Signed) error {
	key, ok := t[s.Signature.Key]
	switch {
	case !ok:
		return fmt.Errorf("signature by unknown key %q", s.Signature.Key)
	case !ed25519.Verify(key, s.Manifest.message(), s.Signature.Value):
		return fmt.Errorf("signature by key %q does not match the spec it came with (changed after it was signed)", s.Signature.Key)
	}
	return nil
}

// Run is what a host is asked to run, as a manifest must cover it.
type Run struct {
	Cluster, Namespace, Role string
	// NamespaceID is the host's worker's namespace's.
	NamespaceID string
	Script, Env string
	// Runtime is how the run's member runs (spec.RuntimeHash of what the run carries), and
	// Container says it runs in a container.
	Runtime   string
	Container bool
	Event     spec.Event
	// Action is set for an action's run, whose Event is the action's name, with Params.
	Action string
	Params []string
}

// setsUp says the run sets a member up to run the spec as it is now: a member's first
// configure, or its upgrade to the spec's newest revision. What members already run (their
// notifications, restarts, actions, removal) is not.
func (r Run) setsUp() bool { return r.Event == spec.EventConfigure || r.Event == spec.EventUpgrade }

// Check says whether the manifests, signed by a trusted key, cover the run, and if not,
// why, in words for the member's detail. signed is newest first, as they came. A run that sets a member up (setsUp) is covered only by the newest manifest
// of generation G, where G is the newest generation of any manifest the host was sent,
// signed or not: a change that was not signed sets up nothing, and an upgrade never goes
// back to what an older signature covered. Any other run is covered by any manifest a
// trusted key signed: it is what a member set up under one already runs.
func (t Trusted) Check(signed []Signed, run Run) error {
	if len(signed) == 0 {
		return fmt.Errorf("unsigned spec: this host runs only specs signed by a key it trusts (--trusted-keys); deploy or apply it with --sign-key")
	}
	newestGeneration := 0
	for _, s := range signed {
		newestGeneration = max(newestGeneration, s.Manifest.Generation)
	}
	newest, older := "", ""
	for i, s := range signed {
		why := t.covers(s, run)
		if why == "" && run.setsUp() && s.Manifest.Generation < newestGeneration {
			why = fmt.Sprintf("the spec key %q signed is of generation %d, and generation %d is newer: a member is set up only under the newest spec, signed (sign the change that made it)", s.Signature.Key, s.Manifest.Generation, newestGeneration)
		}
		switch {
		case why == "":
			return nil
		case i == 0:
			newest = why
		case older == "" && t.Verify(s) == nil:
			older = why // the newest spec a trusted key did sign, and what it lacks
		}
	}
	if older != "" {
		return fmt.Errorf("%s; and before it, %s; nothing ran", newest, older)
	}
	return fmt.Errorf("%s; nothing ran", newest)
}

// NewestSignedAt is the latest signing time the manifests a trusted key signed claim, or
// the zero time.
func (t Trusted) NewestSignedAt(signed []Signed) time.Time {
	var newest time.Time
	for _, s := range signed {
		if t.Verify(s) == nil && s.Manifest.SignedAt.After(newest) {
			newest = s.Manifest.SignedAt
		}
	}
	return newest
}

// NewestSigned is the highest generation of the manifests a trusted key signed, or 0.
func (t Trusted) NewestSigned(signed []Signed) int {
	newest := 0
	for _, s := range signed {
		if t.Verify(s) == nil {
			newest = max(newest, s.Manifest.Generation)
		}
	}
	return newest
}

func (t Trusted) covers(s Signed, run Run) string {
	if len(s.Signature.Value) == 0 {
		return fmt.Sprintf("unsigned spec (generation %d): this host runs only specs signed by a key it trusts (--trusted-keys); deploy, apply or resize it with --sign-key", s.Manifest.Generation)
	}
	if err := t.Verify(s); err != nil {
		return err.Error()
	}
	m := s.Manifest
	switch {
	case m.Cluster != run.Cluster:
		return fmt.Sprintf("the spec key %q signed is for cluster %q, not %q", s.Signature.Key, m.Cluster, run.Cluster)
	case m.Namespace != run.Namespace:
		return fmt.Sprintf("the spec key %q signed is for namespace %q, not %q", s.Signature.Key, m.Namespace, run.Namespace)
	case m.NamespaceID != "" && m.NamespaceID != run.NamespaceID:
		return fmt.Sprintf("the spec key %q signed is for the namespace of ID %s, not this one's (%s): a namespace of the same name elsewhere", s.Signature.Key, m.NamespaceID, run.NamespaceID)
	}
	i := slices.IndexFunc(m.Roles, func(r Role) bool { return r.Name == run.Role })
	if i < 0 {
		return fmt.Sprintf("the spec key %q signed has no role %q", s.Signature.Key, run.Role)
	}
	r := m.Roles[i]
	switch {
	case r.Script != run.Script:
		return fmt.Sprintf("role %s's startscript is not the one key %q signed (unsigned spec change)", run.Role, s.Signature.Key)
	case r.Env != run.Env:
		return fmt.Sprintf("role %s's env is not the one key %q signed (unsigned spec change)", run.Role, s.Signature.Key)
	case run.setsUp() && m.RuntimeSigned && r.Runtime != run.Runtime:
		return fmt.Sprintf("role %s's image, container user, volumes, published ports, privileges, resources, limits or probe are not those key %q signed (unsigned spec change)", run.Role, s.Signature.Key)
	case run.setsUp() && !m.RuntimeSigned && run.Container:
		return fmt.Sprintf("role %s runs in containers, and key %q signed its spec before signatures covered containers (image, privileges, volumes): sign it again", run.Role, s.Signature.Key)
	case run.Action != "":
		if !spec.IsActionRun(run.Action, run.Event) || !slices.Contains(r.Actions, run.Action) {
			return fmt.Sprintf("role %s's actions, as key %q signed them, do not include %s", run.Role, s.Signature.Key, run.Action)
		}
		// Signed with claims, an action's parameters are those its signed schema names
		// (an action without one takes none); signed before, any.
		schema := r.ActionParams[run.Action]
		if schema == nil && m.Generation > 0 {
			schema = map[string]string{}
		}
		if err := spec.CheckActionParams(schema, run.Action, run.Params); err != nil {
			return fmt.Sprintf("%v, as key %q signed it", err, s.Signature.Key)
		}
	case !slices.Contains(r.Events, run.Event):
		return fmt.Sprintf("role %s's events, as key %q signed them, do not include %s", run.Role, s.Signature.Key, run.Event)
	}
	return ""
}
