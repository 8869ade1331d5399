package backend

import "fmt"

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
