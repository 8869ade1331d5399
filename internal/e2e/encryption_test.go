package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// writeKeyFile writes a codec key file of the keys' lines, owner-only.
func writeKeyFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKeyLine(t *testing.T, id string) string {
	t.Helper()
	res := run(t, nil, "codec-key", "new", id)
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, id+" ") {
		t.Fatalf("codec-key new %s: %s", id, res)
	}
	return strings.TrimSpace(res.Stdout)
}

// keyIDsInHistories counts, per key ID, the encrypted payloads in the histories of a
// cluster's workflows (its own and its roles' children), and the payloads other than
// search attributes that are plain JSON.
func keyIDsInHistories(t *testing.T, address, cluster string, ids ...string) (perKey map[string]int, plain int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, err := testenv.ClientOptions(address)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.DialContext(ctx, co)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	perKey = map[string]int{}
	histories := 0
	var token []byte
	for {
		resp, err := raw.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Executions {
			if !strings.Contains(e.GetExecution().GetWorkflowId(), cluster) {
				continue
			}
			histories++
			it := raw.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				// Search attributes stay readable by design: the server indexes them.
				if ev.GetUpsertWorkflowSearchAttributesEventAttributes() != nil {
					continue
				}
				if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
					a.SearchAttributes = nil
				}
				if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
					a.SearchAttributes = nil
				}
				if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
					a.SearchAttributes = nil
				}
				text, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					perKey[id] += bytes.Count(text, []byte(`"encryption-key-id":"`+base64.StdEncoding.EncodeToString([]byte(id))+`"`))
				}
				plain += bytes.Count(text, []byte(`"encoding":"`+base64.StdEncoding.EncodeToString([]byte("json/plain"))+`"`))
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	if histories < 2 {
		t.Fatalf("found %d histories of cluster %s; want its workflow and its roles'", histories, cluster)
	}
	return perKey, plain
}

// The codec end to end, on dev: a cluster deployed before the codec was turned on keeps
// working after it is; with the key, a secret from a file and a plain env value reach the
// scripts, status and list work, and neither value is anywhere at rest (the SQLite file
// read raw with its WAL, the export, the logs), while the value written before the codec
// is, which shows the search finds what is there. A client without the key gets a clear
// error, not garbage. Rotating (a new key first, the old second) reads the old histories
// and writes new payloads under the new key.
func TestTheCodecKeepsEveryValueOutOfTemporalAndRotates(t *testing.T) {
	t.Parallel()
	guard(t)
	dir := t.TempDir()
	secrets, data := filepath.Join(dir, "secrets"), filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	before, plain, password := "before-"+rand.Text(), "plain-"+rand.Text(), "password-"+rand.Text()
	if err := os.MkdirAll(filepath.Join(secrets, "coded"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "coded", "db-password"), []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	keyA, keyB := newKeyLine(t, "key-a"), newKeyLine(t, "key-b")
	keys := filepath.Join(dir, "codec.keys")
	writeKeyFile(t, keys, keyA)
	address, logFile := freeAddress(t), filepath.Join(dir, "dev.log")
	startDevWith := func(name string, extra ...string) *testenv.Process {
		args := append([]string{"dev", "--no-ui", "--no-gateway", "--db", filepath.Join(dir, "dev.db"), "--data", data,
			"--secrets-dir", secrets, "--address", address, "--log-file", logFile}, extra...)
		dev, err := testenv.Start(dir, dir, name, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dev.Stop)
		if err := dev.WaitFor("Ready.", time.Minute); err != nil {
			t.Fatal(err)
		}
		return dev
	}
	stopDev := func(dev *testenv.Process) {
		if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
			t.Fatalf("dev did not stop cleanly: %d %v", code, err)
		}
	}
	script := filepath.Join(dir, "secret.sh")
	if err := os.WriteFile(script, []byte(secretScript), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := func(name, env string) string {
		p := filepath.Join(dir, name+".yaml")
		body := "name: " + name + "\nroles:\n  - {name: db, members: 2, startscript: " + script + ", env: {TRACE: " + filepath.Join(dir, name+".trace") + ", " + env + "}}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noKey := []string{"TEMPORAL_ADDRESS=" + address}
	withKey := append(noKey[:1:1], codec.KeyFileEnv+"="+keys)

	// Before the codec: a cluster whose plain value is stored as it is.
	dev := startDevWith("dev-plain")
	if res := run(t, noKey, "deploy", "-f", spec("early", "PLAIN: "+before), "--wait"); res.Code != 0 {
		t.Fatalf("deploy before the codec: %s", res)
	}
	stopDev(dev)

	// The codec on: the early cluster carries on, and a new one is encrypted throughout.
	dev = startDevWith("dev-key-a", "--codec-key-file", keys)
	if res := run(t, withKey, "resize", "early", "db=3", "--wait"); res.Code != 0 {
		t.Fatalf("resize of a cluster started before the codec: %s", res)
	}
	if res := run(t, withKey, "deploy", "-f", spec("coded", "PLAIN: "+plain+", DB_PASSWORD: {fromFile: db-password}"), "--wait"); res.Code != 0 {
		t.Fatalf("deploy under the codec: %s", res)
	}
	for _, m := range []string{"coded-db-0", "coded-db-1"} {
		for v, value := range map[string]string{"PLAIN": plain, "DB_PASSWORD": password} {
			got, err := os.ReadFile(filepath.Join(clusterDir(data, "coded"), m, v+".sha256"))
			sum := sha256.Sum256([]byte(value))
			if err != nil || strings.TrimSpace(string(got)) != hex.EncodeToString(sum[:]) {
				t.Errorf("%s's script did not get %s: %q, %v", m, v, got, err)
			}
		}
	}
	if s := statusJSONAt(t, withKey, "coded"); s.Phase != workflows.PhaseReady {
		t.Errorf("status with the key: %s", s.Phase)
	}
	if s := statusJSONAt(t, withKey, "early"); s.Phase != workflows.PhaseReady || len(s.Role("db").Members) != 3 {
		t.Errorf("status of the early cluster: %s, %d members", s.Phase, len(s.Role("db").Members))
	}
	if res := run(t, withKey, "list"); res.Code != 0 || !strings.Contains(res.Stdout, "coded") {
		t.Errorf("list: %s", res)
	}
	// Without the key: a clear refusal that names what is missing.
	res := run(t, noKey, "status", "coded")
	if res.Code == 0 || !strings.Contains(res.Stderr, "--codec-key-file") || !strings.Contains(res.Stderr, "key-a") {
		t.Errorf("status without the key: %s; want a failure naming --codec-key-file and key-a", res)
	}
	exported := filepath.Join(dir, "export.json")
	if res := run(t, withKey, "export", "coded", "-o", exported); res.Code != 0 {
		t.Fatalf("export: %s", res)
	}
	// The sealed export opens with the key (the dry run then finds the cluster live here) and
	// is refused without it.
	if res := run(t, withKey, "import", "-f", exported, "--dry-run"); !strings.Contains(res.Stdout+res.Stderr, "cluster coded is live on this server") {
		t.Errorf("dry-run import of the sealed export with the key: %s", res)
	}
	if res := run(t, noKey, "import", "-f", exported, "--dry-run"); res.Code == 0 || !strings.Contains(res.Stderr, "does not open here") {
		t.Errorf("dry-run import of the sealed export without the key: %s", res)
	}
	perKey, plainPayloads := keyIDsInHistories(t, address, "coded", "key-a", "key-b")
	if perKey["key-a"] == 0 || perKey["key-b"] != 0 || plainPayloads != 0 {
		t.Errorf("under key A, the history holds %v encrypted and %d plain payloads", perKey, plainPayloads)
	}
	stopDev(dev)

	// A worker without the key leaves the encrypted cluster's workflow running: the task it
	// cannot read fails, and waits for a worker with the key (the rotation's, next).
	dev = startDevWith("dev-no-key")
	taskFailsWithoutTheKey(t, address, keys, "coded")
	stopDev(dev)

	// Rotation: B first, A kept to read what A wrote.
	writeKeyFile(t, keys, keyB, keyA)
	dev = startDevWith("dev-key-b", "--codec-key-file", keys)
	if s := statusJSONAt(t, withKey, "coded"); s.Phase != workflows.PhaseReady {
		t.Errorf("status after rotation: %s", s.Phase)
	}
	if res := run(t, withKey, "resize", "coded", "db=1", "--wait"); res.Code != 0 {
		t.Fatalf("resize after rotation: %s", res)
	}
	perKey, plainPayloads = keyIDsInHistories(t, address, "coded", "key-a", "key-b")
	if perKey["key-b"] == 0 || plainPayloads != 0 {
		t.Errorf("after rotation, the history holds %v encrypted and %d plain payloads; want key-b's", perKey, plainPayloads)
	}
	for _, n := range []string{"early", "coded"} {
		if res := run(t, withKey, "delete", n, "--wait"); res.Code != 0 {
			t.Errorf("delete %s: %s", n, res)
		}
	}
	stopDev(dev)

	// At rest: neither value of the coded cluster anywhere; the early plain value in the database.
	matches, _ := filepath.Glob(filepath.Join(dir, "dev-*"))
	database := assertNotAtRest(t, append([]string{filepath.Join(dir, "dev.db"), filepath.Join(dir, "dev.db-wal"), exported, logFile}, matches...), plain, password)
	if !bytes.Contains(database, []byte(before)) {
		t.Error("the value written before the codec is not in the database either: the search would not find a plain value there")
	}
}

// taskFailsWithoutTheKey sends the cluster's workflow an event about no member (which it
// ignores), encrypted with the keys, so that the keyless worker now running replays the
// workflow from its encrypted input; it fails the test unless that task fails and is
// retried while the workflow runs on.
func taskFailsWithoutTheKey(t *testing.T, address, keys, cluster string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, err := testenv.ClientOptions(address)
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.Apply(&co, keys); err != nil {
		t.Fatal(err)
	}
	c, err := client.DialContext(ctx, co)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := workflows.ClusterWorkflowID(cluster)
	if err := c.SignalWorkflow(ctx, id, "", workflows.MemberEventSignal, workflows.MemberEvent{Member: "no-such-member", Event: workflows.HealthDown}); err != nil {
		t.Fatal(err)
	}
	var d *workflowservice.DescribeWorkflowExecutionResponse
	waitUpTo(t, time.Minute, "the keyless worker's task failed and retried, or the workflow ended", func() bool {
		if d, err = c.DescribeWorkflowExecution(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || d.GetPendingWorkflowTask().GetAttempt() >= 2
	})
	if status := d.GetWorkflowExecutionInfo().GetStatus(); status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("a worker without the key ended the encrypted cluster's workflow: %s", status)
	}
}

// assertNotAtRest fails the test for each file that holds one of the values, and returns
// what the database files (dev.db*) among them hold, for the caller to check that a
// value it expects is found there.
func assertNotAtRest(t *testing.T, files []string, values ...string) (database []byte) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a value that must not be at rest", f)
			}
		}
		if strings.HasPrefix(filepath.Base(f), "dev.db") {
			database = append(database, b...)
		}
	}
	return database
}
