package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// traceScript is a startscript that records when each run starts and ends, with its
// arguments, checks what a member is promised (its folder as working directory, configmeta
// listing it and its dependencies ready), and fails or dawdles on request.
const traceScript = `#!/bin/sh
now() { date +%s.%N; }
echo "start $(now) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT $*" >> "$TRACE"
echo "running $CLUSTERFLOW_EVENT for $CLUSTERFLOW_MEMBER of $CLUSTERFLOW_ROLE in $CLUSTERFLOW_CLUSTER"
# What a member is told of its story: why it leaves, whether it joins, whom it replaces.
echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT reason=${CLUSTERFLOW_REASON:-} joining=${CLUSTERFLOW_JOINING:-} replaces=${CLUSTERFLOW_REPLACES:-}" >> "$TRACE.story"
if [ "$CLUSTERFLOW_EVENT" = configure ]; then
  # Who forms the role's app cluster: the member told so, and the one configmeta marks.
  formedby=$(grep "\"role\":\"$CLUSTERFLOW_ROLE\"" "$CLUSTERFLOW_CONFIGMETA" | grep '"bootstrap":true' | grep -o '"name":"[^"]*"' | cut -d '"' -f 4 | tr '\n' ' ')
  echo "$CLUSTERFLOW_MEMBER bootstrap=${CLUSTERFLOW_BOOTSTRAP:-} formedby=${formedby% }" >> "$TRACE.forms"
  echo "$CLUSTERFLOW_HOST" > host # where the member runs, for tests of placement
  echo "${CLUSTERFLOW_ADDRESS:-}" > address
  [ "$(pwd -P)" = "$(cd "$CLUSTERFLOW_MEMBER_DIR" && pwd -P)" ] || { echo "wrong working directory $(pwd)" >&2; exit 9; }
  [ -f "$CLUSTERFLOW_CONFIGMETA" ] || { echo "no configmeta at $CLUSTERFLOW_CONFIGMETA" >&2; exit 9; }
  grep -q "\"name\":\"$CLUSTERFLOW_MEMBER\"" "$CLUSTERFLOW_CONFIGMETA" || { echo "$CLUSTERFLOW_MEMBER not in configmeta" >&2; exit 9; }
  for dep in ${DEPS:-}; do
    grep "\"role\":\"$dep\"" "$CLUSTERFLOW_CONFIGMETA" | grep -q '"state":"ready"' || { echo "$dep not ready in configmeta" >&2; exit 9; }
  done
fi
# What configmeta says of the member as it leaves.
if [ "$CLUSTERFLOW_EVENT" = decommission ] || [ "$CLUSTERFLOW_EVENT" = teardown ]; then
  state=$(grep -o "\"name\":\"$CLUSTERFLOW_MEMBER\",[^}]*" "$CLUSTERFLOW_CONFIGMETA" | grep -o '"state":"[a-z_]*"' | head -n 1)
  echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT ${state:-unlisted}" >> "$TRACE.meta"
fi
# FAIL_MEMBER fails its FAIL_EVENT (configure unless set), while FAIL_WHILE exists if set.
if [ "$CLUSTERFLOW_EVENT" = "${FAIL_EVENT:-configure}" ] && [ "$CLUSTERFLOW_MEMBER" = "${FAIL_MEMBER:-}" ] && { [ -z "${FAIL_WHILE:-}" ] || [ -e "$FAIL_WHILE" ]; }; then
  echo "about to fail"
  echo "boom: $CLUSTERFLOW_MEMBER cannot start" >&2
  echo "end $(now) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT failed" >> "$TRACE"
  exit 3
fi
[ "$CLUSTERFLOW_EVENT" != configure ] || sleep "${SLEEP:-0}"
# An upgrade runs the new revision, which CLUSTERFLOW_REVISION names too; it takes UPGRADE_SLEEP.
if [ "$CLUSTERFLOW_EVENT" = upgrade ]; then
  [ "$5" = "$CLUSTERFLOW_REVISION" ] || { echo "upgrade to revision $5 with CLUSTERFLOW_REVISION=$CLUSTERFLOW_REVISION" >&2; exit 9; }
  sleep "${UPGRADE_SLEEP:-0}"
fi
[ "$CLUSTERFLOW_EVENT" != restart ] || sleep "${RESTART_SLEEP:-0}"
# HOLD names a file: while it exists, configure waits; HOLD_TEARDOWN does the same for teardown.
if [ "$CLUSTERFLOW_EVENT" = configure ] && [ -n "${HOLD:-}" ]; then
  while [ -e "$HOLD" ]; do sleep 0.1; done
fi
if [ "$CLUSTERFLOW_EVENT" = teardown ] && [ -n "${HOLD_TEARDOWN:-}" ]; then
  while [ -e "$HOLD_TEARDOWN" ]; do sleep 0.1; done
fi
echo "end $(now) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT ok" >> "$TRACE"
`

// story reads what the trace's scripts were told of their story, a line per run:
// "MEMBER EVENT reason=R joining=J replaces=M", for the given event.
func story(t *testing.T, trace, event string) []string {
	t.Helper()
	data, err := os.ReadFile(trace + ".story")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == event {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	return lines
}

// forms reads what each configure was told of who forms its role's app cluster, a line
// per run: "MEMBER bootstrap=B formedby=M", sorted.
func forms(t *testing.T, trace string) []string {
	t.Helper()
	data, err := os.ReadFile(trace + ".forms")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Sort(lines)
	return lines
}

// scriptRun is one startscript run as the trace recorded it.
type scriptRun struct {
	Member, Event string
	// Args are the script's arguments, e.g. "--addnodes --role worker --nodes a,b".
	Args       string
	Start, End float64
	Outcome    string
}

// writeCluster writes a spec and the trace script into a fresh folder and returns the spec
// path and the trace file the scripts append to. In roles, TRACE_FILE stands for that file.
func writeCluster(t *testing.T, spec string) (specPath, tracePath string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trace.sh"), []byte(traceScript), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath = writeSpec(t, filepath.Join(dir, "cluster.yaml"), "cluster.yaml", spec)
	return specPath, filepath.Join(dir, "trace.log")
}

// writeSpec writes another spec next to one writeCluster wrote, sharing its trace.
func writeSpec(t *testing.T, specPath, file, spec string) string {
	t.Helper()
	trace := filepath.Join(filepath.Dir(specPath), "trace.log")
	path := filepath.Join(filepath.Dir(specPath), file)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(spec, "TRACE_FILE", trace)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readTrace pairs start and end lines into runs, in start order.
func readTrace(t *testing.T, path string) []scriptRun {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var runs []scriptRun
	open := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		ts, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("bad trace line %q", line)
		}
		key := f[2] + " " + f[3]
		switch f[0] {
		case "start":
			open[key] = len(runs)
			runs = append(runs, scriptRun{Member: f[2], Event: f[3], Args: strings.Join(f[4:], " "), Start: ts})
		case "end":
			if i, ok := open[key]; ok {
				runs[i].End, runs[i].Outcome = ts, f[4]
				delete(open, key)
			}
		}
	}
	return runs
}

func runsOf(runs []scriptRun, memberPrefix, event string) []scriptRun {
	var out []scriptRun
	for _, r := range runs {
		if strings.HasPrefix(r.Member, memberPrefix) && (event == "" || r.Event == event) {
			out = append(out, r)
		}
	}
	return out
}

// holdOn creates a HOLD file: scripts told to wait on it wait until release removes it.
func holdOn(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func release(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
