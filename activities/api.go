// Package activities holds every side effect clusterflow's workflows cause, as methods on
// Activities, which carries the member backend they act through.
package activities

import (
	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
)

// Activity input and result types. They are the backend's own types: the activities add
// Temporal concerns (heartbeats, error classification) and nothing else.
type (
	MemberRef    = backend.Member
	ClusterFiles = backend.ClusterFiles
	ScriptRun    = backend.ScriptRun
	ScriptResult = backend.ScriptResult
)

// Error types of failed startscripts. Both are non-retryable: running a failing script
// again rarely helps, and a user wants to see the failure now.
const (
	ErrScriptFailed   = agent.ErrScriptFailed
	ErrScriptTimedOut = agent.ErrScriptTimedOut
)
