package worker

import "runtime/debug"

// buildID names this build in workflow task completions, e.g. "clusterflow@1a2b3c4d5e6f".
// Setting it also spares the SDK from hashing the whole binary (hundreds of MiB with the
// embedded server) each time a worker starts.
func buildID() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "clusterflow"
	}
	revision, dirty := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if revision == "" {
		return "clusterflow@" + info.Main.Version
	}
	return "clusterflow@" + revision + dirty
}
