package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// Hosts choose what they run. h1 takes only team-a clusters and lets a spec set loader
// variables; h2 takes any cluster but no loader variable. Placement follows: team-b's
// members all go to h2, a team-a role with PATH in its env only to h1, and a team-b role
// with PATH fits nowhere, so its deploy is refused naming the variable. A cluster whose
// workflow was started with the hosts' allow-lists stripped (a crafted input) is placed on
// h1 anyway, and h1 refuses it: its members fail, saying why, and nothing of it is written
// on h1.
func TestHostsRunOnlyWhatTheyAllow(t *testing.T) {
	t.Parallel()
	guard(t)
	f := newFleet(t, "h1", "h2")
	f.hosts["h1"].args = []string{"--allow-clusters", "team-a-*", "--allow-env-override"}
	f.killHost("h1")
	f.startHost("h1")
	f.waitForHosts("h1 ready with its allow-list", func(hs []workflows.HostDocument) bool {
		i := slices.IndexFunc(hs, func(h workflows.HostDocument) bool { return h.Name == "h1" })
		return i >= 0 && hs[i].State == workflows.HostReady && slices.Equal(hs[i].Admission.Clusters, []string{"team-a-*"}) && hs[i].Admission.EnvOverride
	})
	if table := f.cli("hosts"); !strings.Contains(table.Stdout, "clusters team-a-*; loader variables") || !strings.Contains(table.Stdout, " any") {
		t.Errorf("the hosts table does not say what each host runs:\n%s", table.Stdout)
	}
	specFile := func(name, env string) string {
		p, _ := writeCluster(t, "name: "+name+"\nroles:\n  - {name: w, members: 4, startscript: trace.sh, env: {TRACE: TRACE_FILE"+env+"}}\n")
		return p
	}
	hostsOf := func(name string) []string {
		var hosts []string
		s := f.status(name)
		for _, m := range s.Role("w").Members {
			hosts = append(hosts, m.Host)
		}
		slices.Sort(hosts)
		return slices.Compact(hosts)
	}
	if res := f.cli("deploy", "-f", specFile("team-b-db", ""), "--wait"); res.Code != 0 {
		t.Fatalf("deploy team-b-db: %s", res)
	}
	if got := hostsOf("team-b-db"); !slices.Equal(got, []string{"h2"}) {
		t.Errorf("team-b-db is on %v, want h2 only", got)
	}
	if res := f.cli("deploy", "-f", specFile("team-a-db", ""), "--wait"); res.Code != 0 {
		t.Fatalf("deploy team-a-db: %s", res)
	}
	if got := hostsOf("team-a-db"); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Errorf("team-a-db is on %v, want h1 and h2", got)
	}
	if res := f.cli("deploy", "-f", specFile("team-a-path", ", PATH: /usr/bin:/bin"), "--wait"); res.Code != 0 {
		t.Fatalf("deploy team-a-path: %s", res)
	}
	if got := hostsOf("team-a-path"); !slices.Equal(got, []string{"h1"}) {
		t.Errorf("team-a-path is on %v, want h1 only", got)
	}
	res := f.cli("deploy", "-f", specFile("team-b-path", ", PATH: /usr/bin:/bin"))
	if res.Code != 2 || !strings.Contains(res.Stderr, "h1 runs only clusters team-a-*, not team-b-path") ||
		!strings.Contains(res.Stderr, "h2 lets no spec set the loader variable PATH") {
		t.Errorf("deploy of team-b-path with PATH: %s; want a refusal naming both hosts' reasons", res)
	}

	// A crafted start: the hosts as if they allowed everything.
	var hosts []workflows.Host
	for _, h := range f.hostList() {
		timeout, err := time.ParseDuration(h.Timeout)
		if err != nil {
			t.Fatalf("host %s: timeout %q: %v", h.Name, h.Timeout, err)
		}
		if h.Name == "h1" {
			reg := workflows.HostRegistration{Name: h.Name, Address: h.Address, Labels: h.Labels, Timeout: timeout, BootID: h.BootID}
			hosts = append(hosts, workflows.Host{HostRegistration: reg, LastSeen: h.LastSeen, Members: h.Members})
		}
	}
	c, err := spec.Load(specFile("team-b-crafted", ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc := f.dial()
	defer tc.Close()
	if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ClusterWorkflowID(c.Name), TaskQueue: workflows.DefaultTaskQueue},
		workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: c, Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to refuse the crafted cluster", func() bool {
		s := f.status(c.Name)
		for _, m := range s.Role("w").Members {
			if m.Host == "h1" && strings.Contains(m.Detail, "host h1 runs only clusters team-a-*, not team-b-crafted") {
				return true
			}
		}
		return false
	})
	if _, err := os.Stat(clusterDir(f.hosts["h1"].data, c.Name)); !os.IsNotExist(err) {
		t.Errorf("h1 holds files of the crafted cluster (%v)", err)
	}
	for _, n := range []string{"team-b-db", "team-a-db", "team-a-path", c.Name} {
		if res := f.cli("delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
}
