package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/jsonstream"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/local"
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

// A pull's messages, as an engine streams them for an image of two layers, sum up to the
// line status shows: layers done of those known, and bytes of those with a size.
func TestAPullIsSummedUpALayerAtATime(t *testing.T) {
	steps := []struct {
		msg     jsonstream.Message
		changed bool
		want    string
	}{
		{jsonstream.Message{Status: "Pulling from app", ID: "1"}, false, "0 of 0 layers, 0.0 of 0.0 MB"},
		{jsonstream.Message{Status: "Pulling fs layer", ID: "a"}, true, "0 of 1 layers, 0.0 of 0.0 MB"},
		{jsonstream.Message{Status: "Pulling fs layer", ID: "b"}, true, "0 of 2 layers, 0.0 of 0.0 MB"},
		{jsonstream.Message{Status: "Waiting", ID: "b"}, false, "0 of 2 layers, 0.0 of 0.0 MB"},
		{jsonstream.Message{Status: "Downloading", ID: "a", Progress: &jsonstream.Progress{Current: 1e6, Total: 4e6}}, true, "0 of 2 layers, 1.0 of 4.0 MB"},
		{jsonstream.Message{Status: "Downloading", ID: "b", Progress: &jsonstream.Progress{Current: 5e5, Total: 2e6}}, true, "0 of 2 layers, 1.5 of 6.0 MB"},
		{jsonstream.Message{Status: "Download complete", ID: "a"}, true, "1 of 2 layers, 4.5 of 6.0 MB"},
		{jsonstream.Message{Status: "Already exists", ID: "b"}, true, "2 of 2 layers, 6.0 of 6.0 MB"},
		{jsonstream.Message{Status: "Digest: sha256:0"}, false, "2 of 2 layers, 6.0 of 6.0 MB"},
	}
	layers := pullLayers{}
	for i, step := range steps {
		if changed := layers.add(step.msg); changed != step.changed || layers.String() != step.want {
			t.Errorf("after message %d (%+v): changed %v, %q; want %v, %q", i, step.msg, changed, layers, step.changed, step.want)
		}
	}
}

// A role's container user is refused by name when it is root's, another cluster's script
// user on the host, or no uid[:gid] at all; an unprivileged one of no cluster passes.
func TestAContainerUserIsNeverRootNorAnotherClusters(t *testing.T) {
	l, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &Backend{Backend: l}
	m := backend.MemberRef{Cluster: "c", Role: "web", Name: "c-web-0"}
	for _, user := range []string{"4321", "4321:4321", ""} {
		if err := d.checkUser(m, user); err != nil {
			t.Errorf("user %q: %v", user, err)
		}
	}
	for user, want := range map[string]string{
		"0": "is root's", "0:0": "is root's", "1000:0": "is root's", "x": "is not uid[:gid]", "12:y": "is not uid[:gid]", "-1": "is not uid[:gid]",
	} {
		var refused *backend.RefusedError
		if err := d.checkUser(m, user); !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
			t.Errorf("user %q: %v; want a refusal that says it %s", user, err, want)
		}
	}
}

// --allow-privileged names clusters by NAMESPACE/CLUSTER globs: privileged containers are
// run for those alone, and a list that is not one is refused.
func TestPrivilegedContainersAreAllowedPerCluster(t *testing.T) {
	globs, err := ParsePrivileged("prod/db-*, dev/*")
	if err != nil {
		t.Fatal(err)
	}
	d := &Backend{Backend: &local.Backend{}, AllowPrivileged: globs}
	for _, tc := range []struct {
		namespace, cluster string
		want               bool
	}{{"prod", "db-1", true}, {"prod", "web", false}, {"dev", "anything", true}, {"staging", "db-1", false}} {
		d.Namespace = tc.namespace
		if got := d.privilegedAllowed(tc.cluster); got != tc.want {
			t.Errorf("%s/%s: %v, want %v", tc.namespace, tc.cluster, got, tc.want)
		}
	}
	for _, bad := range []string{"db-*", "/x", "prod/[", "prod/"} {
		if _, err := ParsePrivileged(bad); err == nil {
			t.Errorf("--allow-privileged %q taken", bad)
		}
	}
}
