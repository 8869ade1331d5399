package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// spanScript serves a page from each member at its http port, and at its configure and
// at each addnodes fetches the page of every member set up or being set up, at the
// address and port configmeta gives (by nc: busybox-static's wget crashes).
const spanScript = `#!/bin/sh
set -eu
case "$1" in
--configure)
  mkdir -p "$CLUSTERFLOW_MEMBER_DIR/www"
  echo "hello from $CLUSTERFLOW_MEMBER" > "$CLUSTERFLOW_MEMBER_DIR/www/index.html"
  httpd -p "$CLUSTERFLOW_PORT_HTTP" -h "$CLUSTERFLOW_MEMBER_DIR/www" ;;
--addnodes) ;;
*) exit 0 ;;
esac
for addr in $(grep -E '"state":"(ready|configuring|pending)"' "$CLUSTERFLOW_CONFIGMETA" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p'); do
  i=0
  until page=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 "$addr" "$CLUSTERFLOW_PORT_HTTP" 2> /dev/null | grep '^hello from'); do
    i=$((i + 1)); [ "$i" -le 60 ] || { echo "cannot reach $addr" >&2; exit 1; }
    sleep 0.5
  done
  echo "reached $addr: $page"
done
`

// A cluster's members on several docker hosts, each host's engine its own: with
// --member-address host, a member is reached at its host's address, where every port of its
// is published, as on the local backend. Three hosts in network namespaces, each with an
// engine of its own; two members, one a host, reach each other; a host cut off is lost,
// its member placed on the third host, which reaches the survivor and is reached by it.
func TestMembersOnSeveralEnginesReachEachOtherAtTheirHosts(t *testing.T) {
	// Serial, as the other docker tests: three engines starting containers.
	guard(t)
	engines := map[string]*testenv.Docker{}
	pools := []string{"10.213.192.0/20", "10.213.208.0/20", "10.213.224.0/20"}
	f := newFleetPrepared(t, hostTimeout, func(h *fleetHost) {
		engine := testenv.StartDockerIn(t, h.net.Namespace, pools[len(engines)])
		engine.ImportImage(t, "clusterflow-test/box:1", nil)
		engines[h.name] = engine
		h.args = []string{"--backend", "docker", "--docker-host", engine.Host, "--member-address", "host", "--publish-address", h.net.Address}
	}, "h1", "h2", "h3")
	dir := t.TempDir()
	script := filepath.Join(dir, "span.sh")
	if err := os.WriteFile(script, []byte(spanScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "span.yaml")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf(`
name: span
roles:
  - name: www
    members: 2
    startscript: %s
    image: clusterflow-test/box:1
    ports: {http: 8080}
    placement: {maxPerHost: 1}
    replaceAfter: 1s
`, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	addressOf := func(host string) string { return f.hosts[host].net.Address }
	// reached checks that member's script, for event, fetched each page at its host.
	reached := func(member, event string, pages map[string]string) {
		t.Helper()
		out := f.cli("logs", "span", member, "--event", event)
		for peer, host := range pages {
			if !strings.Contains(out.Stdout, "reached "+addressOf(host)+": hello from "+peer) {
				t.Errorf("%s's %s did not reach %s at %s's address:\n%s", member, event, peer, host, out)
			}
		}
	}

	if res := f.cli("deploy", "-f", specPath, "--wait", "--timeout", "2m"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	st := f.status("span")
	hostOf := map[string]string{}
	for _, m := range st.Roles[0].Members {
		hostOf[m.Name] = m.Host
	}
	if len(hostOf) != 2 || hostOf["span-www-0"] == hostOf["span-www-1"] {
		t.Fatalf("the members' hosts: %v", placements(st))
	}
	for member := range hostOf {
		reached(member, "configure", hostOf)
	}

	// A cluster's network is its own: where the engine keeps its rules (here, in the host's
	// namespace), a container on another network of the engine reaches no member by the
	// member's own address, though the member answers there.
	engine := engines[hostOf["span-www-0"]]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := engine.Client.NetworkCreate(ctx, "outsiders", client.NetworkCreateOptions{Driver: "bridge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Client.ContainerCreate(ctx, client.ContainerCreateOptions{Name: "outsider",
		Config:     &container.Config{Image: "clusterflow-test/box:1", Cmd: []string{"sleep", "600"}},
		HostConfig: &container.HostConfig{NetworkMode: "outsiders"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Client.ContainerStart(ctx, "outsider", client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	member := "cf-span-www-0." + st.Home
	inspected, err := engine.Client.ContainerInspect(ctx, member, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	memberIP := ""
	for _, endpoint := range inspected.Container.NetworkSettings.Networks {
		memberIP = endpoint.IPAddress.String()
	}
	fetch := "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 " + memberIP + " 8080"
	if out, _ := engine.Exec(member, "sh", "-c", fetch); !strings.Contains(out, "hello from span-www-0") {
		t.Errorf("span-www-0 does not answer at its own address %s: %s", memberIP, out)
	}
	if out, _ := engine.Exec("outsider", "sh", "-c", fetch); strings.Contains(out, "hello from") {
		t.Errorf("a container of another network reached span-www-0 at %s: %s", memberIP, out)
	}

	// The first member's host cut off: lost, its member replaced on the host left.
	lost := hostOf["span-www-0"]
	survivor := hostOf["span-www-1"]
	spare := slices.DeleteFunc([]string{"h1", "h2", "h3"}, func(h string) bool { return h == lost || h == survivor })[0]
	f.hosts[lost].net.Cut()
	waitUpTo(t, 2*time.Minute, "the lost host's member replaced on "+spare, func() bool {
		// A query may wait on the cut host, which held the workflow last, until the server
		// gives up on it: a status that does not answer is asked again.
		res := f.cli("status", "span", "-o", "json")
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &st) != nil {
			return false
		}
		return st.Phase == workflows.PhaseReady && st.Member("span-www-0") == nil && len(st.Roles[0].Members) == 2
	})
	replacement := ""
	for _, m := range st.Roles[0].Members {
		if m.Name != "span-www-1" {
			replacement = m.Name
			if m.Host != spare {
				t.Errorf("the replacement %s is on %s, not %s", m.Name, m.Host, spare)
			}
		}
	}
	reached(replacement, "configure", map[string]string{"span-www-1": survivor, replacement: spare})
	reached("span-www-1", "addnodes", map[string]string{replacement: spare})
}
