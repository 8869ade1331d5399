package worker

import "github.com/clusterflow/clusterflow/internal/version"

// buildID names this build in workflow task completions, e.g. "clusterflow@1a2b3c4d5e6f".
// Setting it also spares the SDK from hashing the whole binary (hundreds of MiB with the
// embedded server) each time a worker starts.
func buildID() string {
	v := version.Get()
	if v.Commit == "" {
		return "clusterflow@" + v.Release
	}
	return "clusterflow@" + version.Short(v.Commit)
}
