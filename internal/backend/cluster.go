package backend

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
)

// ClusterRef names a cluster on a backend: its name and, for a cluster deployed since
// clusters had homes, its home, which sets it apart from a cluster of the same name of
// another server or namespace (or an earlier one of this one) sharing the backend.
type ClusterRef struct {
	Name string `json:"name"`
	Home string `json:"home,omitempty"`
}

// Key is the cluster's key: NAME, or NAME@HOME.
func (c ClusterRef) Key() string {
	if c.Home == "" {
		return c.Name
	}
	return c.Name + "@" + c.Home
}

var validHome = regexp.MustCompile(`^[0-9a-f]{12}$`)

// Check checks both names before a backend uses them (in a path, a container name).
func (c ClusterRef) Check() error {
	if err := spec.CheckName(c.Name); err != nil {
		return fmt.Errorf("cluster name %w", err)
	}
	if c.Home != "" && !validHome.MatchString(c.Home) {
		return fmt.Errorf("cluster home %q is not 12 hex digits", c.Home)
	}
	return nil
}

// ParseKey reads a cluster's key.
func ParseKey(key string) (ClusterRef, error) {
	name, home, _ := strings.Cut(key, "@")
	c := ClusterRef{Name: name, Home: home}
	return c, c.Check()
}

// HomeOf makes a home from a unique string (a workflow's run ID): 12 hex digits of its
// SHA-256, not its prefix, which is a timestamp in time-ordered IDs.
func HomeOf(unique string) string { return spec.ContentHash([]byte(unique))[:12] }
