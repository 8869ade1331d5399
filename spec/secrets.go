package spec

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// A secret reference is an env value a host fills in when it launches a script, so the
// value itself never enters Temporal: only the reference does. In a spec:
//
//	env:
//	  DB_PASSWORD: {fromFile: db-password}   # <host's secrets folder>/<cluster>/db-password
//	  API_TOKEN: {fromEnv: API_TOKEN}         # CLUSTERFLOW_SECRET_<CLUSTER>__API_TOKEN in the worker's environment
//
// In a Role's Env it is kept in-band, as a value no literal can be: literals may not
// contain NUL, and a reference starts with one. So the env's hash, its shipping to hosts
// and the rule that a running role's env cannot change cover references unchanged.
type SecretRef struct {
	// FromFile is a path relative to the host's secrets folder for the cluster.
	FromFile string `json:"fromFile,omitempty"`
	// FromEnv names N for the worker's variable SecretEnvName(cluster, N).
	FromEnv string `json:"fromEnv,omitempty"`
}

// SecretEnvPrefix is what a worker's variables must begin with to be read by fromEnv: a
// spec can never read the worker's own credentials (TEMPORAL_API_KEY and the like).
const SecretEnvPrefix = "CLUSTERFLOW_SECRET_"

// SecretEnvName is the worker's variable a cluster's {fromEnv: n} reads:
// CLUSTERFLOW_SECRET_<CLUSTER>__<n>, the cluster's name upper-cased with '-' as '_'. A
// cluster reads only variables named for it, never another's: n has no "__" and starts
// with a letter (CheckSecretEnv), so the last "__" tells the cluster from n.
func SecretEnvName(cluster, n string) string {
	return SecretEnvPrefix + strings.ToUpper(strings.ReplaceAll(cluster, "-", "_")) + "__" + n
}

var secretEnvN = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*$`)

// CheckSecretEnv says what is wrong with n as the N of {fromEnv: N}, if anything.
func CheckSecretEnv(n string) error {
	if !secretEnvN.MatchString(n) {
		return fmt.Errorf("fromEnv %q is not a valid environment variable name of words joined by single '_', starting with a letter (the worker's variable is %s)", n, SecretEnvName("<cluster>", n))
	}
	return nil
}

const (
	secretMarker   = "\x00"
	fromFilePrefix = secretMarker + "fromFile:"
	fromEnvPrefix  = secretMarker + "fromEnv:"
)

// Encode is the reference as an env value.
func (s SecretRef) Encode() string {
	if s.FromFile != "" {
		return fromFilePrefix + s.FromFile
	}
	return fromEnvPrefix + s.FromEnv
}

// ParseSecret reads an env value: the reference it encodes, or false for a literal.
func ParseSecret(value string) (SecretRef, bool) {
	switch {
	case strings.HasPrefix(value, fromFilePrefix):
		return SecretRef{FromFile: strings.TrimPrefix(value, fromFilePrefix)}, true
	case strings.HasPrefix(value, fromEnvPrefix):
		return SecretRef{FromEnv: strings.TrimPrefix(value, fromEnvPrefix)}, true
	}
	return SecretRef{}, false
}

// Check says what is wrong with a reference, if anything. Hosts check again: a workflow
// input may have been written by anyone who can start one.
func (s SecretRef) Check() error {
	switch {
	case (s.FromFile == "") == (s.FromEnv == ""):
		return fmt.Errorf("a secret takes exactly one of fromFile and fromEnv")
	case s.FromEnv != "":
		return CheckSecretEnv(s.FromEnv)
	case s.FromFile != "" && (path.IsAbs(s.FromFile) || path.Clean(s.FromFile) != s.FromFile || s.FromFile == "." ||
		s.FromFile == ".." || strings.HasPrefix(s.FromFile, "../") || strings.ContainsRune(s.FromFile, 0)):
		return fmt.Errorf("fromFile %q must be a plain path inside the host's secrets folder for this cluster (<secrets>/<cluster>/), such as db-password: a spec may name no other file on a host", s.FromFile)
	}
	return nil
}

// String describes the reference without any value, for messages.
func (s SecretRef) String() string {
	if s.FromFile != "" {
		return "fromFile " + s.FromFile
	}
	return "fromEnv " + s.FromEnv
}
