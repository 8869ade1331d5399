// Package activities holds every side effect clusterflow's workflows cause, as methods on
// Activities, which carries the member backend they act through. Their names, inputs and
// results are the workflows' (workflows.ActivityContract).
package activities

import "github.com/clusterflow/clusterflow/internal/backend"

// Error types of failed startscripts. All are non-retryable: running a failing script
// again rarely helps, and a user wants to see the failure now.
const (
	ErrScriptFailed   = backend.ErrScriptFailed
	ErrScriptTimedOut = backend.ErrScriptTimedOut
	// ErrSecretUnavailable: a secret reference of the role's env could not be filled in on
	// the member's host, so nothing ran.
	ErrSecretUnavailable = backend.ErrSecretUnavailable
	// ErrHostRefused: the host does not run this cluster, namespace or env (its Admission),
	// whatever placed the member there; nothing ran.
	ErrHostRefused = backend.ErrHostRefused
)
