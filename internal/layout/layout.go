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

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
)

// Root is a host's data folder.
type Root string

// Agent is the agent's own folder: its socket, connections and run records, its user's
// alone.
func (r Root) Agent() string { return filepath.Join(string(r), "agent") }

// Clusters holds a folder per cluster.
func (r Root) Clusters() string { return filepath.Join(string(r), "clusters") }

// Cluster names a cluster's folder on a host (see backend.ClusterRef): its key is the
// folder's name.
type Cluster = backend.ClusterRef

// Cluster is a cluster's folder: its members' sandboxes, and its scripts, envs, notices
// and configmeta in .clusterflow/ (member names never start with '.').
func (r Root) Cluster(c Cluster) (string, error) {
	if err := c.Check(); err != nil {
		return "", err
	}
	return filepath.Join(r.Clusters(), c.Key()), nil
}

// Sandbox is a member's folder, which its scripts own.
func (r Root) Sandbox(c Cluster, member string) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	if _, _, ok := spec.ParseMemberName(c.Name, member); !ok {
		return "", fmt.Errorf("member name %q is not <cluster>-<role>-<ordinal> for cluster %q", member, c.Name)
	}
	return filepath.Join(dir, member), nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Script is a startscript installed for a cluster, named by its content's SHA-256.
func (r Root) Script(c Cluster, hash string) (string, error) {
	return r.byHash(c, "scripts", hash, "", "script")
}

// Env is a role's env installed for a cluster, named by its SHA-256.
func (r Root) Env(c Cluster, hash string) (string, error) {
	return r.byHash(c, "env", hash, ".json", "env")
}

func (r Root) byHash(c Cluster, folder, hash, ext, what string) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	if !sha256Hex.MatchString(hash) {
		return "", fmt.Errorf("%s hash %q is not a SHA-256", what, hash)
	}
	return filepath.Join(dir, ".clusterflow", folder, hash+ext), nil
}

// SignedDir holds the signed manifests a cluster's specs came with, by their hash.
func (r Root) SignedDir(c Cluster) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "signed"), nil
}

// Tmp is the cluster's own temporary folder on a host (its scripts' TMPDIR), its script
// user's alone: clusters sharing a host share no temporary files.
func (r Root) Tmp(c Cluster) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "tmp"), nil
}

// OwnerFile names the server and namespace that last wrote the cluster's folder (the
// namespace's ID, unique across servers): a host removes no folder another one owns.
func (r Root) OwnerFile(c Cluster) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "owner"), nil
}

// FolderKeyFile holds the hash of the cluster's folder key (backend.ClusterFiles.FolderKey),
// root's alone: a write presenting the key may take the folder over.
func (r Root) FolderKeyFile(c Cluster) (string, error) {
	dir, err := r.Cluster(c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".clusterflow", "folder-key"), nil
}

// Records holds the agent's records of a member's runs: in the agent's folder, out of the
// sandbox, so a script cannot rewrite what the agent trusts about its runs.
func (r Root) Records(c Cluster, member string) (string, error) {
	if _, err := r.Sandbox(c, member); err != nil {
		return "", err
	}
	return filepath.Join(r.Agent(), "records", c.Key(), member), nil
}

// ClusterRecords holds the records of all of a cluster's members.
func (r Root) ClusterRecords(c Cluster) (string, error) {
	if _, err := r.Cluster(c); err != nil {
		return "", err
	}
	return filepath.Join(r.Agent(), "records", c.Key()), nil
}

// Within a sandbox, relative to it:

// LogsDir holds a member's script output, a file per event and stream.
const LogsDir = "logs"

// Output names an event's stdout and stderr files; an action's run is named by its
// action, which is never an event's name.
func Output(event string) (stdout, stderr string, err error) {
	if !slices.Contains(spec.KnownEvents, spec.Event(event)) && spec.CheckName(event) != nil {
		return "", "", fmt.Errorf("unknown event %q", event)
	}
	base := filepath.Join(LogsDir, event)
	return base + ".stdout", base + ".stderr", nil
}

// StateDir holds what clusterflow keeps in a sandbox: the nodes files and ExitDir. Member
// names never start with '.', nor do the folders apps make, by convention.
const StateDir = ".clusterflow"

// ExitDir holds the exit status of each run, written there by the script's own user.
const ExitDir = StateDir + "/exit"

// ExitFile is where a run's exit status is written.
func ExitFile(runID string) string { return filepath.Join(ExitDir, runID) }

// NodesFile lists the nodes of a member's addnodes or delnodes, one a line.
func NodesFile(event string) string { return filepath.Join(StateDir, event+".nodes") }
