package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// A member's name is its container's host name and its DNS name: at the longest names a
// spec allows (a cluster and a role of 63 characters each) it is refused by name, before
// anything is made, rather than failing in the engine or in DNS.
func TestAMemberNameMustBeAHostName(t *testing.T) {
	longest := strings.Repeat("c", 63) + "-" + strings.Repeat("r", 63) + "-0"
	var refused *backend.RefusedError
	if err := checkHostName(longest); !errors.As(err, &refused) || !strings.Contains(err.Error(), "shorten the cluster's or the role's name") {
		t.Errorf("a member name of %d characters: %v", len(longest), err)
	}
	if err := checkHostName(strings.Repeat("c", 59) + "-r-0"); err != nil {
		t.Errorf("a member name of 63 characters: %v", err)
	}
}
