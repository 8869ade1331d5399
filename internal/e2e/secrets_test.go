package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// secretScript records the SHA-256 of each variable it was given in its sandbox, and that
// it ran, so the test can compare without the values ever being printed.
const secretScript = `#!/bin/sh
echo "ran $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
for v in PLAIN DB_PASSWORD TOKEN; do
  eval "printf %s \"\$$v\"" | sha256sum | cut -d' ' -f1 > "$CLUSTERFLOW_MEMBER_DIR/$v.sha256"
done
`

// Secret references keep values out of Temporal: a role's env names a file in the host's
// secrets folder for the cluster and a CLUSTERFLOW_SECRET_ variable of the worker, and the
// scripts get both values while neither appears in the server's database (WAL included),
// an export, or the logs. A plain value does appear there, which shows the search finds
// what is there. A reference the host cannot fill in makes the member config_error with
// the variable and the file named, and nothing runs.
func TestSecretReferencesReachScriptsButNeverTemporal(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	data := filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	plain, password, token := "plain-"+rand.Text(), "password-"+rand.Text(), "token-"+rand.Text()
	// Secret files are the namespace's: secrets/<namespace>/<cluster>/.
	vaultSecrets := filepath.Join(secrets, "default", "vault")
	if err := os.MkdirAll(vaultSecrets, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vaultSecrets, "db-password"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	address := freeAddress(t)
	logFile := filepath.Join(dir, "dev.log")
	// A variable is named for the cluster that may read it.
	dev, err := testenv.Start(dir, dir, "dev-secrets", []string{"CLUSTERFLOW_SECRET_VAULT__API_TOKEN=" + token},
		"dev", "--no-ui", "--no-gateway", "--db", filepath.Join(dir, "dev.db"), "--data", data, "--secrets-dir", secrets,
		"--address", address, "--log-file", logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Stop)
	if err := dev.WaitFor("Ready.", time.Minute); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEMPORAL_ADDRESS=" + address}
	script := filepath.Join(dir, "secret.sh")
	if err := os.WriteFile(script, []byte(secretScript), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := func(name string) string {
		p := filepath.Join(dir, name+".yaml")
		body := "name: " + name + "\nroles:\n  - {name: db, members: 2, startscript: " + script + ", env: {TRACE: " + filepath.Join(dir, name+".trace") +
			", PLAIN: " + plain + ", DB_PASSWORD: {fromFile: db-password}, TOKEN: {fromEnv: API_TOKEN}}}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if res := run(t, env, "deploy", "-f", spec("vault"), "--wait"); res.Code != 0 {
		t.Fatalf("deploy: %s", res)
	}
	for _, m := range []string{"vault-db-0", "vault-db-1"} {
		for v, value := range map[string]string{"PLAIN": plain, "DB_PASSWORD": password, "TOKEN": token} {
			got, err := os.ReadFile(filepath.Join(clusterDir(data, "vault"), m, v+".sha256"))
			sum := sha256.Sum256([]byte(value))
			if err != nil || strings.TrimSpace(string(got)) != hex.EncodeToString(sum[:]) {
				t.Errorf("%s's script did not get %s: %q, %v", m, v, got, err)
			}
		}
	}
	if res := run(t, env, "status", "vault"); res.Code != 0 || strings.Contains(res.Stdout, password) {
		t.Errorf("status: %s", res)
	}
	if res := run(t, env, "list"); res.Code != 0 || !strings.Contains(res.Stdout, "vault") {
		t.Errorf("list: %s", res)
	}
	exported := filepath.Join(dir, "export.json")
	if res := run(t, env, "export", "vault", "-o", exported); res.Code != 0 {
		t.Fatalf("export: %s", res)
	}

	// A reference this host cannot fill in: the member fails, saying which and why, and
	// its script never runs.
	if err := os.Remove(filepath.Join(vaultSecrets, "db-password")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(secrets, "default", "nokey"), 0o700); err != nil {
		t.Fatal(err)
	}
	res := run(t, env, "deploy", "-f", spec("nokey"), "--wait")
	want := "secret DB_PASSWORD: " + filepath.Join(secrets, "default", "nokey", "db-password") + ": no such file or directory"
	if res.Code != 1 || !strings.Contains(res.Stdout+res.Stderr, want) {
		t.Errorf("deploy with a missing secret file: %s, want exit 1 saying %q", res, want)
	}
	s := statusJSONAt(t, env, "nokey")
	for _, m := range s.Role("db").Members {
		if m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, want) {
			t.Errorf("%s: %s %q, want config_error saying %q", m.Name, m.State, m.Detail, want)
		}
	}
	if trace, err := os.ReadFile(filepath.Join(dir, "nokey.trace")); err == nil {
		t.Errorf("a script ran without its secret:\n%s", trace)
	}
	// vault's members cannot run their teardown without the secret: they are removed all
	// the same, and the delete says so. nokey's configures never ran: nothing to tear down.
	if res := run(t, env, "delete", "vault", "--wait"); res.Code != 1 || !strings.Contains(res.Stderr, "the teardown of vault-db-0, vault-db-1 failed") {
		t.Errorf("delete vault: %s, want exit 1 naming both members' failed teardowns", res)
	}
	if res := run(t, env, "delete", "nokey", "--wait"); res.Code != 0 {
		t.Errorf("delete nokey: %s", res)
	}
	if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
		t.Errorf("dev did not stop cleanly: %d %v", code, err)
	}

	// At rest: the database with its WAL, the export and the logs hold the plain value,
	// never a secret's.
	var files []string
	for _, f := range []string{"dev.db", "dev.db-wal", "export.json", "dev.log", dev.Stdout, dev.Stderr} {
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		files = append(files, f)
	}
	database := assertNotAtRest(t, files, password, token)
	if !bytes.Contains(database, []byte(plain)) {
		t.Error("the plain value is not in the database either: the search would not find a secret there")
	}
}

// statusJSONAt is `status -o json` of a cluster on the server env names.
func statusJSONAt(t *testing.T, env []string, name string) workflows.ClusterStatus {
	t.Helper()
	return parseStatus(t, name, run(t, env, "status", name, "-o", "json"))
}

// A secret is its namespace's and its cluster's alone: a cluster of the same name in
// another namespace, on the same hosts and secrets folder, reads none of the first one's
// secret files, and a cluster reads no worker variable named for another cluster.
func TestASecretIsItsNamespacesAndClustersAlone(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	c := s.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: "team-b", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	teamB := append(slices.Clone(s.env), "TEMPORAL_NAMESPACE=team-b")
	waitFor(t, "namespace team-b set up", func() bool { return run(t, teamB, "setup").Code == 0 })
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(filepath.Join(secrets, "default", "vault"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "default", "vault", "db-password"), []byte("default's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The workers' one variable is named for another cluster.
	workerEnv := func(env []string) []string {
		return append(slices.Clone(env), spec.SecretEnvName("other", "TOKEN")+"=other's")
	}
	s.startWith(testenv.StartIn, "", workerEnv(s.env), "worker-default", 1, "Worker starting", "worker", "--data", s.data, "--secrets-dir", secrets)
	s.startWith(testenv.StartIn, "", workerEnv(teamB), "worker-team-b", 1, "Worker starting", "worker", "--data", s.data, "--secrets-dir", secrets)
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specFile := func(name, env string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte("name: "+name+"\nroles:\n  - {name: db, members: 1, startscript: "+script+", env: {"+env+"}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if res := run(t, s.env, "deploy", "-f", specFile("vault", "DB: {fromFile: db-password}"), "--wait"); res.Code != 0 {
		t.Fatalf("the namespace's own cluster: %s", res)
	}
	for _, tc := range []struct {
		env          []string
		name, secret string
		says         string
	}{
		{teamB, "vault", "DB: {fromFile: db-password}", filepath.Join(secrets, "team-b", "vault", "db-password") + ": no such file or directory"},
		{s.env, "thief", "T: {fromEnv: TOKEN}", "the worker has no variable CLUSTERFLOW_SECRET_THIEF__TOKEN"},
	} {
		res := run(t, tc.env, "deploy", "-f", specFile(tc.name, tc.secret), "--wait")
		if res.Code != 1 || !strings.Contains(res.Stdout+res.Stderr, tc.says) {
			t.Errorf("%s in %v: %s; want its member refused, saying %q", tc.name, tc.env[len(tc.env)-1], res, tc.says)
		}
	}
	for _, d := range []struct {
		env  []string
		name string
	}{{s.env, "vault"}, {teamB, "vault"}, {s.env, "thief"}} {
		run(t, d.env, "delete", d.name, "--wait")
	}
}
