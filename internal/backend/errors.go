package backend

import (
	"errors"
	"fmt"
)

// OwnedElsewhereError is a cluster folder another server or namespace owns: this host's
// worker must not remove it.
type OwnedElsewhereError struct{ Key, Owner string }

func (e *OwnedElsewhereError) Error() string {
	return fmt.Sprintf("cluster folder %s belongs to another server or namespace (namespace ID %s); it was left alone", e.Key, e.Owner)
}

// SecretError says why a secret reference could not be filled in. Nothing runs then: the
// member's script would start without its configuration.
type SecretError struct {
	Name string // the env variable
	Err  error
}

func (e *SecretError) Error() string { return fmt.Sprintf("secret %s: %v", e.Name, e.Err) }
func (e *SecretError) Unwrap() error { return e.Err }

// NoSandboxError says a member has nothing on this host to run a script in: its setup
// was stopped before it began, or it is gone. A teardown then has nothing to undo.
type NoSandboxError struct{ Member, Dir string }

func (e *NoSandboxError) Error() string {
	return fmt.Sprintf("member %s has no sandbox at %s", e.Member, e.Dir)
}

// RefusedError is a script run the backend will not run, whoever asks again (a script
// that is not what its hash says).
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Fault is an error of a kind above as it crosses a process boundary (a worker calling its
// host's agent, say), so that the caller tells them apart as if the backend were its own.
type Fault struct {
	Kind string `json:"kind"`
	// Name, Key, Owner, Member and Dir are the error's fields, as its kind has them.
	Name   string `json:"name,omitempty"`
	Key    string `json:"key,omitempty"`
	Owner  string `json:"owner,omitempty"`
	Member string `json:"member,omitempty"`
	Dir    string `json:"dir,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Kinds of Fault.
const (
	faultOwnedElsewhere = "ownedElsewhere"
	faultSecret         = "secret"
	faultNoSandbox      = "noSandbox"
	faultRefused        = "refused"
)

// FaultOf is err as a Fault, or nil when it is of no kind above.
func FaultOf(err error) *Fault {
	var (
		elsewhere *OwnedElsewhereError
		secret    *SecretError
		noSandbox *NoSandboxError
		refused   *RefusedError
	)
	switch {
	case errors.As(err, &elsewhere):
		return &Fault{Kind: faultOwnedElsewhere, Key: elsewhere.Key, Owner: elsewhere.Owner}
	case errors.As(err, &secret):
		return &Fault{Kind: faultSecret, Name: secret.Name, Reason: secret.Err.Error()}
	case errors.As(err, &noSandbox):
		return &Fault{Kind: faultNoSandbox, Member: noSandbox.Member, Dir: noSandbox.Dir}
	case errors.As(err, &refused):
		return &Fault{Kind: faultRefused, Reason: refused.Reason}
	}
	return nil
}

// Err rebuilds the error; message is what the error said, for a kind this version does not
// know.
func (f *Fault) Err(message string) error {
	switch f.Kind {
	case faultOwnedElsewhere:
		return &OwnedElsewhereError{Key: f.Key, Owner: f.Owner}
	case faultSecret:
		return &SecretError{Name: f.Name, Err: errors.New(f.Reason)}
	case faultNoSandbox:
		return &NoSandboxError{Member: f.Member, Dir: f.Dir}
	case faultRefused:
		return &RefusedError{Reason: f.Reason}
	}
	return errors.New(message)
}
