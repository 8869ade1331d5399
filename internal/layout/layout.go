// Package layout is where a host keeps what it holds under its data folder. The worker that
// prepares a run and the agent that starts it derive every path from the same names
// ({cluster, member, event, script hash}) here, checking each name before it becomes part
// of a path, so the agent trusts no path it is sent.
package layout

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// Root is a host's data folder.
type Root string

// Agent is the agent's own folder: its socket, connections and run records, its user's
// alone.
func (r Root) Agent() string { return filepath.Join(string(r), "agent") }

// Clusters holds a folder per cluster.
func (r Root) Clusters() string { return filepath.Join(string(r), "clusters") }

// Cluster is a cluster's folder: its members' sandboxes, and its scripts, envs, notices
// and configmeta in .clusterflow/ (member names never start with '.').
func (r Root) Cluster(cluster string) (string, error) {
	if err := spec.CheckName(cluster); err != nil {
		return "", fmt.Errorf("cluster name %w", err)
	}
	return filepath.Join(r.Clusters(), cluster), nil
}

// Sandbox is a member's folder, which its scripts own.
func (r Root) Sandbox(cluster, member string) (string, error) {
	dir, err := r.Cluster(cluster)
	if err != nil {
		return "", err
	}
	if _, _, ok := spec.ParseMemberName(cluster, member); !ok {
		return "", fmt.Errorf("member name %q is not <cluster>-<role>-<ordinal> for cluster %q", member, cluster)
	}
	return filepath.Join(dir, member), nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Script is a startscript installed for a cluster, named by its content's SHA-256.
func (r Root) Script(cluster, hash string) (string, error) {
	return r.byHash(cluster, "scripts", hash, "", "script")
}

// Env is a role's env installed for a cluster, named by its SHA-256.
func (r Root) Env(cluster, hash string) (string, error) {
	return r.byHash(cluster, "env", hash, ".json", "env")
}

func (r Root) byHash(cluster, folder, hash, ext, what string) (string, error) {
	dir, err := r.Cluster(cluster)
	if err != nil {
		return "", err
	}
	if !sha256Hex.MatchString(hash) {
		return "", fmt.Errorf("%s hash %q is not a SHA-256", what, hash)
	}
	return filepath.Join(dir, ".clusterflow", folder, hash+ext), nil
}

// SignedDir holds the signed manifests a cluster's specs came with, by their hash.
func (r Root) SignedDir(cluster string) (string, error) {
	dir, err := r.Cluster(cluster)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "signed"), nil
}

// Records holds the agent's records of a member's runs: in the agent's folder, out of the
// sandbox, so a script cannot rewrite what the agent trusts about its runs.
func (r Root) Records(cluster, member string) (string, error) {
	if _, err := r.Sandbox(cluster, member); err != nil {
		return "", err
	}
	return filepath.Join(r.Agent(), "records", cluster, member), nil
}

// ClusterRecords holds the records of all of a cluster's members.
func (r Root) ClusterRecords(cluster string) (string, error) {
	if _, err := r.Cluster(cluster); err != nil {
		return "", err
	}
	return filepath.Join(r.Agent(), "records", cluster), nil
}

// Within a sandbox, relative to it:

// LogsDir holds a member's script output, a file per event and stream.
const LogsDir = "logs"

// Output names an event's stdout and stderr files.
func Output(event string) (stdout, stderr string, err error) {
	if !slices.Contains(spec.KnownEvents, spec.Event(event)) {
		return "", "", fmt.Errorf("unknown event %q", event)
	}
	base := filepath.Join(LogsDir, event)
	return base + ".stdout", base + ".stderr", nil
}

// ExitDir holds the exit status of each run, written there by the script's own user.
const ExitDir = ".clusterflow/exit"

// ExitFile is where a run's exit status is written.
func ExitFile(runID string) string { return filepath.Join(ExitDir, runID) }

// NodesFile lists the nodes of a member's addnodes or delnodes, one a line.
func NodesFile(event string) string { return filepath.Join(".clusterflow", event+".nodes") }
