package e2e

import (
	"slices"
	"strings"
	"testing"
)

// The compose file's frontend demands a client certificate of the stack's own CA, and only
// the parts that need one have it: the CA's key is in a volume only the certificate job
// mounts; the server's key in one only the server has; the hosts' key is the worker's user's
// (members run as users of their clusters'); every client of the frontend presents its
// certificate and checks the server's. The hosts share a network with the Temporal server
// alone, not with PostgreSQL or the Web UI. The production tests run the job and the server
// as this file says (TestAMemberReachesNoControlEndpointOfTheComposeStack).
func TestComposeFrontendDemandsAClientCertificate(t *testing.T) {
	t.Parallel()
	guard(t)
	c := readCompose(t)
	server := c.Services["temporal"].Environment
	if server["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"] != "true" {
		t.Errorf("the server's TEMPORAL_TLS_REQUIRE_CLIENT_AUTH is %q, want true", server["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"])
	}
	for _, k := range []string{"TEMPORAL_TLS_FRONTEND_CERT", "TEMPORAL_TLS_FRONTEND_KEY", "TEMPORAL_TLS_CLIENT1_CA_CERT", "TEMPORAL_TLS_SERVER_CERT", "TEMPORAL_TLS_SERVER_KEY", "TEMPORAL_TLS_SERVER_CA_CERT"} {
		if !strings.HasPrefix(server[k], "/etc/temporal/tls/") {
			t.Errorf("the server's %s is %q, want a file of its certificates' volume", k, server[k])
		}
	}
	// Which services mount each volume of certificates.
	mounts := map[string][]string{}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "temporal-") || src == "./temporal-tls" {
				mounts[src] = append(mounts[src], name)
			}
		}
	}
	for src := range mounts {
		slices.Sort(mounts[src])
	}
	want := map[string][]string{
		"temporal-ca":          {"clusterflow-certs"},
		"temporal-tls-server":  {"clusterflow-certs", "temporal"},
		"temporal-tls-control": {"clusterflow-certs", "temporal-namespace", "temporal-ui"},
		"temporal-tls-hosts":   {"clusterflow-certs", "clusterflow-host-1", "clusterflow-host-2", "clusterflow-setup"},
		"./temporal-tls":       {"clusterflow-certs"},
	}
	for src, services := range want {
		if !slices.Equal(mounts[src], services) {
			t.Errorf("%s is mounted by %v, want %v alone", src, mounts[src], services)
		}
	}
	// The job gives the hosts' folder to the user the image's host runs its worker as.
	certs := strings.Join(c.Services["clusterflow-certs"].Command, " ")
	for _, part := range []string{"--server /certs/temporal=1000:1000", "--client /certs/control=1000:1000", "--client /certs/hosts=clusterflow", "--ca-dir /certs/ca", "--server-name temporal"} {
		if !strings.Contains(certs, part) {
			t.Errorf("the certificate job's command %q lacks %q", certs, part)
		}
	}
	if !strings.Contains(readRepoFile(t, "deploy/docker/host.sh"), "user=${CLUSTERFLOW_WORKER_USER:-clusterflow}") {
		t.Error("the image's host no longer runs its worker as clusterflow, the owner of the hosts' certificates")
	}
	if c.Services["clusterflow-certs"].NetworkMode != "none" {
		t.Error("the certificate job needs no network")
	}
	// Every client of the frontend presents a certificate and checks the server's name.
	for _, name := range []string{"clusterflow-setup", "clusterflow-host-1", "clusterflow-host-2"} {
		env := c.Services[name].Environment
		for _, k := range []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"} {
			if !strings.HasPrefix(env[k], "/etc/clusterflow/tls/") {
				t.Errorf("%s: %s is %q, want a file of the hosts' certificates", name, k, env[k])
			}
		}
		if env["TEMPORAL_TLS_SERVER_NAME"] != "temporal" {
			t.Errorf("%s: TEMPORAL_TLS_SERVER_NAME %q", name, env["TEMPORAL_TLS_SERVER_NAME"])
		}
	}
	ui := c.Services["temporal-ui"].Environment
	if ui["TEMPORAL_TLS_CERT"] == "" || ui["TEMPORAL_TLS_KEY"] == "" || ui["TEMPORAL_TLS_CA"] == "" || ui["TEMPORAL_TLS_ENABLE_HOST_VERIFICATION"] != "true" {
		t.Errorf("the Web UI reaches the frontend without a certificate or without checking the server's: %v", ui)
	}
	if ns := strings.Join(c.Services["temporal-namespace"].Command, " "); strings.Count(ns, "$$tls") != 3 || !strings.Contains(ns, "--tls-cert-path") {
		t.Errorf("the namespace job does not give its certificate to each call: %s", ns)
	}
	// Networks: every service is on the ones named, the hosts on the server's alone.
	members := map[string][]string{}
	for name, s := range c.Services {
		if s.NetworkMode == "none" {
			continue
		}
		if len(s.Networks) == 0 {
			t.Errorf("%s is on compose's default network; name its networks", name)
		}
		for _, n := range s.Networks {
			members[n] = append(members[n], name)
		}
	}
	for n := range members {
		slices.Sort(members[n])
	}
	if got, want := members["hosts"], []string{"clusterflow-host-1", "clusterflow-host-2", "clusterflow-setup", "temporal"}; !slices.Equal(got, want) {
		t.Errorf("the hosts' network holds %v, want %v: a member reaches every service on it", got, want)
	}
}
