package e2e

import (
	"strings"
	"testing"
)

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	guard(t)
	for _, cmd := range []string{"dev", "worker", "agent", "setup", "deploy", "resize", "apply", "cancel", "signal", "resume", "reconcile", "status", "list", "delete", "gateway"} {
		res := cli(t, cmd, "-h")
		if res.Code != 0 || !strings.Contains(res.Stderr, "Usage: clusterflow "+cmd) || !strings.Contains(res.Stderr, "--") {
			t.Errorf("%s -h: %s", cmd, res)
		}
	}
	if res := cli(t); res.Code != 2 || !strings.Contains(res.Stderr, "Commands:") {
		t.Errorf("no arguments: %s", res)
	}
	if res := cli(t, "frobnicate"); res.Code != 2 || !strings.Contains(res.Stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %s", res)
	}
	if res := cli(t, "status"); res.Code != 2 || !strings.Contains(res.Stderr, "exactly one cluster NAME") {
		t.Errorf("status without a name: %s", res)
	}
	if res := cli(t, "signal", "demo", "demo-worker-0"); res.Code != 2 || !strings.Contains(res.Stderr, "signal takes a cluster NAME, a MEMBER and an EVENT (down, up, gone or unhealthy), got 2 arguments") {
		t.Errorf("signal without an event: %s", res)
	}
	if res := cli(t, "deploy", "--bogus"); res.Code != 2 || !strings.Contains(res.Stderr, "unknown flag: --bogus") {
		t.Errorf("unknown flag: %s", res)
	}
	// A backend no worker has, or whose engine does not answer, is refused before
	// anything connects or starts.
	for _, cmd := range []string{"worker", "dev"} {
		if res := cli(t, cmd, "--backend", "nomad", "--data", t.TempDir()); res.Code != 2 || !strings.Contains(res.Stderr, `--backend "nomad": unknown; the backends are local, docker`) {
			t.Errorf("%s with an unknown backend: %s", cmd, res)
		}
		if res := cli(t, cmd, "--backend", "docker", "--docker-host", "unix:///nonexistent/docker.sock", "--data", t.TempDir()); res.Code == 0 ||
			!strings.Contains(res.Stderr, "the Docker engine at unix:///nonexistent/docker.sock does not answer") {
			t.Errorf("%s with no Docker engine: %s", cmd, res)
		}
		if res := cli(t, cmd, "--backend", "docker", "--publish-address", "localhost", "--data", t.TempDir()); res.Code != 2 || !strings.Contains(res.Stderr, `--publish-address "localhost": not an IP address`) {
			t.Errorf("%s with a publish address that is no address: %s", cmd, res)
		}
		if res := cli(t, cmd, "--backend", "docker", "--member-address", "host", "--data", t.TempDir()); res.Code != 2 || !strings.Contains(res.Stderr, "give --publish-address this host's address (or 0.0.0.0), not 127.0.0.1") {
			t.Errorf("%s reaching members at the host's address, published on loopback: %s", cmd, res)
		}
		if res := cli(t, cmd, "--allow-privileged", "--data", t.TempDir()); res.Code != 2 || !strings.Contains(res.Stderr, "--allow-privileged is for --backend docker, not local") {
			t.Errorf("%s --allow-privileged on the local backend: %s", cmd, res)
		}
	}
	if res := cli(t, "list", "--log-format", "xml"); res.Code != 2 || !strings.Contains(res.Stderr, `--log-format: "xml" is not json or console`) {
		t.Errorf("bad log format: %s", res)
	}
}

func TestSetupIsIdempotent(t *testing.T) {
	t.Parallel()
	guard(t)
	// The shared server registered the attributes when it was created.
	res := cli(t, "setup")
	if res.Code != 0 || !strings.Contains(res.Stdout, "Already present") || !strings.Contains(res.Stdout, "ClusterName, ClusterPhase, ClusterRoles, ClusterMembers") {
		t.Errorf("setup: %s", res)
	}
}

func TestListShowsClustersAndDeleteTwiceIsFine(t *testing.T) {
	t.Parallel()
	guard(t)
	specPath, _ := writeCluster(t, `
name: listed
roles:
  - {name: only, members: 2, startscript: trace.sh, env: {TRACE: TRACE_FILE}}
`)
	mustSucceed(t, "deploy", "-f", specPath, "--wait")
	waitFor(t, "list to show the cluster as ready", func() bool {
		res := cli(t, "list")
		return res.Code == 0 && strings.Contains(res.Stdout, "listed") && strings.Contains(res.Stdout, "ready")
	})
	mustSucceed(t, "delete", "listed", "--wait")
	res := cli(t, "delete", "listed")
	if res.Code != 0 || !strings.Contains(res.Stdout, "already deleted") {
		t.Errorf("second delete: %s", res)
	}
	waitFor(t, "list to drop the deleted cluster", func() bool {
		res := cli(t, "list", "-o", "json")
		return res.Code == 0 && !strings.Contains(res.Stdout, `"listed"`)
	})
	if res := cli(t, "list", "--all"); !strings.Contains(res.Stdout, "deleted") {
		t.Errorf("list --all should show the deleted cluster: %s", res)
	}
}
