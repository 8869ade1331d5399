package gateway

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
)

// Scope is what a token may do.
type Scope string

const (
	// ScopeEvents may report a member down or up: nothing is lost by either, as a down it
	// reports leads to no replacement by itself (workflows.MemberEvent.WatchOnly).
	ScopeEvents Scope = "events"
	// ScopeReplace may report a member gone or unhealthy, which replaces it and deletes its
	// data: a monitor that only watches needs events, not this.
	ScopeReplace Scope = "replace"
	// ScopeRead may read clusters and metrics.
	ScopeRead Scope = "read"
	// ScopeCodec may encrypt and decrypt payloads through `clusterflow codec-server`: it
	// reads every payload of the namespace, so it is never scoped to clusters.
	ScopeCodec Scope = "codec"
)

var scopes = []Scope{ScopeEvents, ScopeReplace, ScopeRead, ScopeCodec}

// AllClusters is the cluster list of a token that may act on every cluster.
var AllClusters = []string{"*"}

// Token is one line of a token file: a name for the logs, what it may do, on which
// clusters, and the SHA-256 of the secret. The secret itself is never stored.
type Token struct {
	Name   string
	Scopes []Scope
	// Clusters are globs (path.Match) of the cluster names the token may act on or read.
	Clusters []string
	hash     [sha256.Size]byte
}

// Tokens are the tokens the gateway accepts.
type Tokens []Token

// ParseScopes reads a comma list of events, replace, read and codec.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for part := range strings.SplitSeq(s, ",") {
		sc := Scope(strings.TrimSpace(part))
		if !slices.Contains(scopes, sc) {
			return nil, fmt.Errorf("scope %q is not one of events, replace, read, codec", sc)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// ParseClusters reads a comma list of cluster name globs ("*" for every cluster).
func ParseClusters(s string) ([]string, error) {
	var out []string
	for glob := range strings.SplitSeq(s, ",") {
		glob = strings.TrimSpace(glob)
		if _, err := path.Match(glob, ""); err != nil || glob == "" {
			return nil, fmt.Errorf("cluster glob %q is not a valid pattern (use *, ? and [...], as in team-a-*)", glob)
		}
		if !slices.Contains(out, glob) {
			out = append(out, glob)
		}
	}
	return out, nil
}

// ReadTokens reads a token file: one "NAME SCOPES CLUSTERS SHA256HEX" per line (a line of
// three fields, "NAME SCOPES SHA256HEX", is for every cluster), # starts a comment.
func ReadTokens(path string) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	tokens, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return tokens, nil
}

// ParseTokens reads the lines of a token file.
func ParseTokens(r io.Reader) (Tokens, error) {
	var tokens Tokens
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) == 3 { // written before tokens were scoped to clusters
			fields = []string{fields[0], fields[1], "*", fields[2]}
		}
		if len(fields) != 4 {
			return nil, fmt.Errorf("line %d: want NAME SCOPES CLUSTERS SHA256HEX, got %d fields", n, len(fields))
		}
		t := Token{Name: fields[0]}
		var err error
		if t.Scopes, err = ParseScopes(fields[1]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if t.Clusters, err = ParseClusters(fields[2]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		sum, err := hex.DecodeString(fields[3])
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("line %d: the last field must be the 64 hex digits of the token's SHA-256", n)
		}
		copy(t.hash[:], sum)
		if slices.ContainsFunc(tokens, func(o Token) bool { return o.Name == t.Name }) {
			return nil, fmt.Errorf("line %d: token name %q is used twice", n, t.Name)
		}
		tokens = append(tokens, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("no tokens in it (add one with `clusterflow gateway token NAME`)")
	}
	return tokens, nil
}

// Match finds the token whose hash is the secret's. Every entry is compared, in constant
// time, so that the time taken says nothing about which entry came close.
func (ts Tokens) Match(secret string) (Token, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range ts {
		if subtle.ConstantTimeCompare(sum[:], ts[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return ts[found], true
}

// Allows says whether the token has the scope.
func (t Token) Allows(s Scope) bool { return slices.Contains(t.Scopes, s) }

// AllowsCluster says whether the token may act on or read the cluster.
func (t Token) AllowsCluster(cluster string) bool {
	return slices.ContainsFunc(t.Clusters, func(glob string) bool {
		ok, _ := path.Match(glob, cluster)
		return ok
	})
}

// NewToken makes a random secret and the token file line that accepts it.
func NewToken(name string, sc []Scope, clusters []string) (secret, line string, err error) {
	if name == "" || strings.ContainsAny(name, " \t#") {
		return "", "", fmt.Errorf("token NAME %q: must be non-empty, without spaces or '#'", name)
	}
	if secret, err = newSecret(); err != nil {
		return "", "", err
	}
	return secret, TokenFor(name, sc, clusters, secret).Line(), nil
}

func newSecret() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return "cfgw_" + base64.RawURLEncoding.EncodeToString(raw), nil
}

// TokenFor is the token that accepts secret.
func TokenFor(name string, sc []Scope, clusters []string, secret string) Token {
	return Token{Name: name, Scopes: sc, Clusters: clusters, hash: sha256.Sum256([]byte(secret))}
}

// Line is the token's line in a token file.
func (t Token) Line() string {
	return fmt.Sprintf("%s %s %s %s", t.Name, joinScopes(t.Scopes), strings.Join(t.Clusters, ","), hex.EncodeToString(t.hash[:]))
}

// LocalToken reads the secret kept in file (mode 0600), or makes one and keeps it there,
// for a gateway on the user's own machine: `dev`'s.
func LocalToken(file string) (string, error) {
	if data, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(data))) > 0 {
		return strings.TrimSpace(string(data)), nil
	}
	secret, err := newSecret()
	if err != nil {
		return "", err
	}
	return secret, atomicfile.Write(file, []byte(secret+"\n"), 0o600)
}
