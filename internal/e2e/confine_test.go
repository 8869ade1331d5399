package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// bombScript's configure forks sleepers until its fork fails or it has tried 300 times,
// holding them (a bounded fork bomb), then writes where its cluster's TMPDIR is and a
// file there; every other event does nothing.
const bombScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
echo "$TMPDIR" > "$CLUSTERFLOW_MEMBER_DIR/tmpdir"
echo "the bomb's" > "$TMPDIR/mine"
( i=0; while [ $i -lt 300 ]; do sleep 120 & i=$((i+1)); done ) 2>/dev/null
exit 0
`

// calmScript reports what it sees of the bomb's temporary files from its own cluster.
const calmScript = `#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
if cat "$BOMB_TMP/mine" > /dev/null 2>&1; then echo leaked; else echo refused; fi > "$CLUSTERFLOW_MEMBER_DIR/tmp-probe"
[ "$TMPDIR" != "$BOMB_TMP" ] || echo "same TMPDIR" >> "$CLUSTERFLOW_MEMBER_DIR/tmp-probe"
`

// A fork bomb in one cluster leaves another cluster's members ready: a role's
// limits.processes holds the processes of its cluster's user on the host, so the bomb gets
// no more than that, while a cluster deployed beside it sets up as usual. Each cluster has a
// temporary folder of its own (TMPDIR) the other cannot read, and every script runs with
// no_new_privs.
func TestAForkBombInOneClusterLeavesAnotherReady(t *testing.T) {
	t.Parallel()
	guard(t)
	if os.Geteuid() != 0 {
		t.Fatal("script users need the tests to run as root, as CI does")
	}
	data := scriptUserData(t)
	s := newServerStack(t)
	env := append(slices.Clone(s.env), "CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=")
	s.startWith(testenv.StartIn, "", env, "worker", 1, "Worker starting", "worker", "--data", data, "--script-uids", "61900-61909")
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const limit = 40
	bomb := write("bomb.yaml", "name: bomb\nroles:\n  - {name: b, members: 1, startscript: "+write("bomb.sh", bombScript, 0o755)+
		", limits: {processes: "+strconv.Itoa(limit)+"}}\n", 0o644)
	if res := s.cli("deploy", "-f", bomb, "--wait"); res.Code != 0 {
		t.Fatalf("deploy the bomb: %s", res)
	}
	t.Cleanup(func() { s.cli("delete", "bomb", "--wait") })
	uids := scriptUIDs(t, data)
	held := len(processesOf([]int{uids["bomb"]}))
	if held == 0 || held > limit {
		t.Errorf("the bomb's user holds %d processes; want some, and at most its limit %d", held, limit)
	}
	tmpdir, err := os.ReadFile(filepath.Join(clusterDir(data, "bomb"), "bomb-b-0", "tmpdir"))
	if err != nil {
		t.Fatal(err)
	}
	bombTmp := strings.TrimSpace(string(tmpdir))
	calm := write("calm.yaml", "name: calm\nroles:\n  - {name: c, members: 3, startscript: "+write("calm.sh", calmScript, 0o755)+
		", env: {BOMB_TMP: "+bombTmp+"}}\n", 0o644)
	if res := s.cli("deploy", "-f", calm, "--wait"); res.Code != 0 {
		t.Fatalf("deploy beside the bomb: %s", res)
	}
	if st := s.status("calm"); st.Phase != workflows.PhaseReady || st.Role("c").Ready != 3 {
		t.Errorf("the cluster beside the bomb is %s with %d of 3 ready", st.Phase, st.Role("c").Ready)
	}
	if still := len(processesOf([]int{uids["bomb"]})); still == 0 {
		t.Error("the bomb's processes were gone before the other cluster was set up: it proved nothing")
	}
	for i := range 3 {
		probe, err := os.ReadFile(filepath.Join(clusterDir(data, "calm"), "calm-c-"+strconv.Itoa(i), "tmp-probe"))
		if err != nil || strings.TrimSpace(string(probe)) != "refused" {
			t.Errorf("calm-c-%d reading the bomb's temporary file: %q, %v; want refused", i, probe, err)
		}
	}
	if res := s.cli("delete", "bomb", "--wait"); res.Code != 0 {
		t.Errorf("delete the bomb: %s", res)
	}
	waitUpTo(t, 30*time.Second, "the bomb's processes gone with it", func() bool { return len(processesOf([]int{uids["bomb"]})) == 0 })
	if res := s.cli("delete", "calm", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// scriptUIDs reads the users the clusters of a data folder run as, by cluster name.
func scriptUIDs(t *testing.T, data string) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "agent", "script-uids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var byKey map[string]int
	if err := json.Unmarshal(raw, &byKey); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for key, uid := range byKey {
		name, _, _ := strings.Cut(key, "@")
		byName[name] = uid
	}
	return byName
}
