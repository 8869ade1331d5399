# Shared by the bench scripts: build the binary, start `clusterflow dev`, clean up after.
# Expects $root; sets $tmp and $cf, and exports TEMPORAL_ADDRESS.
tmp=$(mktemp -d)
cf=$tmp/clusterflow
bg_pids=()
# cleanup must not stop at a process that is already gone, which set -e would do.
cleanup() {
  set +e
  # A bench that failed between pss_start and pss_stop leaves its sampler waiting for a
  # stop file that rm -rf takes away.
  [ -n "${rss_pid:-}" ] && kill "$rss_pid" 2>/dev/null
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # The agent is detached from the worker on purpose; stop it and anything left.
  # `dev --hosts N` keeps an agent per host under hosts/, so look everywhere.
  find "$tmp" -path '*/agent/agent.pid' 2>/dev/null | while read -r pidfile; do
    kill -9 "$(cat "$pidfile")" 2>/dev/null
  done
  [ -n "${KEEP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

echo "building clusterflow..." >&2
# clusterflow runs clusterflow-dev beside it for `dev`, which runs the worker and the agent.
(cd "$root" && go build -o "$tmp/" ./cmd/clusterflow ./cmd/clusterflow-dev)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export TEMPORAL_ADDRESS=127.0.0.1:$(free_port)
# Benchmarks run scripts in temporary folders only their user may reach; as root, let the
# workers run them as root rather than as users per cluster (bench/scriptusers.sh compares).
export CLUSTERFLOW_ALLOW_ROOT_SCRIPTS=1

# start_bg NAME READY-TEXT ARGS...: run the binary in the background until it prints READY-TEXT.
start_bg() {
  local name=$1 ready=$2
  shift 2
  (cd "$tmp" && exec "$cf" "$@" > "$tmp/$name.log" 2>&1) &
  last_pid=$!
  bg_pids+=("$last_pid")
  for _ in $(seq 300); do grep -q "$ready" "$tmp/$name.log" 2>/dev/null && return; sleep 0.1; done
  cat "$tmp/$name.log" >&2
  exit 1
}

# start_pgserver builds and starts bench/pgserver (Temporal's own server on PostgreSQL,
# configured as docker-compose.yml configures it) and sets $pg_address to its frontend,
# $pg_server_pid to the Temporal server's process, and the array pg_env to a client's
# environment (its client certificate, as the compose file's hosts have theirs): run a
# clusterflow command against it as env "${pg_env[@]}" clusterflow ….
start_pgserver() {
  echo "building the production server (bench/pgserver)..." >&2
  (cd "$root" && go build -o "$tmp/pgserver" ./bench/pgserver)
  mkdir -p "$tmp/pg"
  (cd "$root" && exec "$tmp/pgserver" -dir "$tmp/pg" > "$tmp/pgserver.log" 2>&1) &
  bg_pids+=("$!")
  for _ in $(seq 3000); do grep -q "^Ready" "$tmp/pgserver.log" 2>/dev/null && break; sleep 0.1; done
  grep -q "^Ready" "$tmp/pgserver.log" || { cat "$tmp/pgserver.log" >&2; exit 1; }
  pg_address=$(awk '/^Address:/ {print $2}' "$tmp/pgserver.log")
  pg_server_pid=$(awk '/^Server PID:/ {print $3}' "$tmp/pgserver.log")
  mapfile -t pg_env < <(awk '/^Env:/ {print $2}' "$tmp/pgserver.log")
  pg_env+=("TEMPORAL_ADDRESS=$pg_address")
}

ms() { date +%s%3N; }
# status_ms reads `status -o json` on stdin and prints the workflow's own clock: from the
# cluster's start to the moment it became ready.
status_ms() {
  python3 -c '
import json, sys
from datetime import datetime
s = json.load(sys.stdin)
p = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))
print(round((p(s["updatedAt"]) - p(s["createdAt"])).total_seconds() * 1000))'
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}x')"; }

# xargs_floor N SCRIPT TRACE: the floor of a wide role, N runs of SCRIPT with the same
# parallelism as maxInFlight 500 (xargs -P 500), each in a folder of its own as the agent
# gives each member a sandbox; prints the wall time in ms.
xargs_floor() {
  local start
  rm -rf "$tmp/floor" && mkdir -p "$tmp/floor"
  start=$(ms)
  seq "$1" | TRACE="$3" CLUSTERFLOW_EVENT=configure xargs -P 500 -I{} \
    sh -c 'mkdir -p "$0/m$1" && cd "$0/m$1" && CLUSTERFLOW_MEMBER=m$1 exec "$2"' "$tmp/floor" {} "$2"
  echo $(( $(ms) - start ))
}
# require_quiet waits up to QUIET_WAIT seconds (default 120) for the load average to fall
# under 1, and refuses to measure if it does not: a loaded machine slows the floor more than
# clusterflow, so every ratio it gives flatters clusterflow. With ALLOW_LOAD=1 it measures
# anyway, and $loaded marks every ratio printed.
loaded=""
require_quiet() {
  local load waited=0
  while load=$(cut -d' ' -f1 /proc/loadavg) && awk -v l="$load" 'BEGIN {exit !(l >= 1)}'; do
    if [ "$waited" -ge "${QUIET_WAIT:-120}" ]; then
      if [ -z "${ALLOW_LOAD:-}" ]; then
        echo "refusing to measure: the load average is $load (at least 1) after ${waited}s; a loaded machine's floor flatters every ratio. Stop what runs, or ALLOW_LOAD=1 to measure anyway, marked" >&2
        exit 2
      fi
      loaded="   LOADED (load average $load at the start): this ratio flatters clusterflow"
      echo "WARNING: measuring with the load average at $load" >&2
      return
    fi
    sleep 5
    waited=$((waited + 5))
  done
  echo "load average $load: quiet enough to measure" >&2
}

# pair_ratios FLOOR-FILE MEASURE-FILE: the ratio of each pair (line i of each, taken one
# after the other in the same run), as "median 1.23x (1.10x-1.40x over 5 pairs)".
pair_ratios() {
  python3 - "$1" "$2" <<'PY'
import statistics, sys
floor = [float(x) for x in open(sys.argv[1]).read().split()]
measure = [float(x) for x in open(sys.argv[2]).read().split()]
ratios = sorted(m / f for f, m in zip(floor, measure))
print(f"median {statistics.median(ratios):.2f}x ({ratios[0]:.2f}x-{ratios[-1]:.2f}x over {len(ratios)} pairs)")
PY
}

median() { sort -n | awk '{a[NR]=$1} END {printf "%d\n", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# A startscript that does nothing, and the 3-level cluster of them that bench/deploy.sh and
# bench/transfer.sh deploy: levels_spec NAME (1 controller -> 8 workers -> 2 edge).
printf '#!/bin/sh\nexit 0\n' > "$tmp/noop.sh"
chmod +x "$tmp/noop.sh"
levels_spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, members: 1, startscript: $tmp/noop.sh}
  - {name: worker, members: 8, dependsOn: [controller], startscript: $tmp/noop.sh}
  - {name: edge, members: 2, dependsOn: [worker], startscript: $tmp/noop.sh}
YAML
}

# A startscript that logs its start and end (epoch seconds) to $TRACE and sleeps $SLEEP.
cat > "$tmp/trace.sh" <<'SH'
#!/bin/sh
echo "start $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
[ "$CLUSTERFLOW_EVENT" != configure ] || sleep "${SLEEP:-0}"
echo "end $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
SH
chmod +x "$tmp/trace.sh"

# With PROFILE=1, every clusterflow process serves pprof on loopback (internal/profiling);
# profile_start SECONDS takes a CPU profile of each while the benchmark runs and, when that
# ends, a heap profile; profile_report prints each one's top functions and allocations.
if [ -n "${PROFILE:-}" ]; then
  export CLUSTERFLOW_PPROF_DIR=$tmp/pprof
  mkdir -p "$CLUSTERFLOW_PPROF_DIR"
fi
profile_pids=()
profile_start() {
  [ -n "${PROFILE:-}" ] || return 0
  for addr in "$CLUSTERFLOW_PPROF_DIR"/*.addr; do
    local name
    name=$(basename "$addr" .addr)
    case "$name" in dev-*|worker-*|agent-*) ;; *) continue ;; esac
    (curl -s -o "$CLUSTERFLOW_PPROF_DIR/$name.cpu" "http://$(cat "$addr")/debug/pprof/profile?seconds=$1" &&
      curl -s -o "$CLUSTERFLOW_PPROF_DIR/$name.heap" "http://$(cat "$addr")/debug/pprof/heap") &
    profile_pids+=($!)
  done
}
profile_report() {
  [ -n "${PROFILE:-}" ] || return 0
  wait "${profile_pids[@]}" 2>/dev/null || true
  for p in "$CLUSTERFLOW_PPROF_DIR"/*.cpu; do
    [ -s "$p" ] || continue
    echo "== $(basename "$p" .cpu): top by cumulative CPU"
    go tool pprof -top -cum -nodecount=${PROFILE_TOP:-25} "$cf" "$p" 2>/dev/null | sed -n '1,5p;/flat%/,$p'
  done
  for p in "$CLUSTERFLOW_PPROF_DIR"/*.heap; do
    [ -s "$p" ] || continue
    echo "== $(basename "$p" .heap): top by memory in use at the end of the CPU profile"
    go tool pprof -top -sample_index=inuse_space -nodecount=${PROFILE_TOP:-25} "$cf" "$p" 2>/dev/null | sed -n '1,5p;/flat%/,$p'
  done
}

# pss_start samples the memory of every clusterflow server, worker and agent process every
# 200 ms until pss_stop, which leaves "RSS-MiB PSS-MiB role MiB ..." in $tmp/rss. The CLI
# waiting on the deploy is a client and is left out. RSS counts the binary's pages
# once per process although the processes share them; PSS splits shared pages between
# them, so the PSS sum is what they really take together.
pss_start() {
  python3 - "$cf" "$tmp/rss.stop" > "$tmp/rss" <<'PY' &
import os, sys, time
binary, stop = os.path.realpath(sys.argv[1]), sys.argv[2]
binaries = (binary, binary + "-dev")  # dev runs clusterflow-dev in its place
peak = {"rss": 0, "pss": 0}
each = {}
def kb(path, key):
    for line in open(path):
        if line.startswith(key):
            return int(line.split()[1])
    return 0
while not os.path.exists(stop):
    total = {"rss": 0, "pss": 0}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            # comm first: reading every script's exe link took a sixth of a core at 500 scripts.
            if not open(f"/proc/{pid}/comm").read().startswith("clusterflow") or os.path.realpath(f"/proc/{pid}/exe") not in binaries:
                continue
            cmdline = open(f"/proc/{pid}/cmdline").read()
            role = cmdline.split("\0")[1]
            if role not in ("dev", "worker", "agent"):
                continue
            # A child between fork and exec (the agent starting a script) still has its
            # parent's command line and shares its memory: counting it counted the agent
            # twice, adding up to 80 MiB to the peak during a burst of launches.
            ppid = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
            if open(f"/proc/{ppid}/cmdline").read() == cmdline:
                continue
            rss, pss = kb(f"/proc/{pid}/status", "VmRSS:"), kb(f"/proc/{pid}/smaps_rollup", "Pss:")
            total["rss"] += rss
            total["pss"] += pss
            each[role] = max(each.get(role, 0), rss)
        except (OSError, IndexError):
            pass
    peak = {k: max(peak[k], total[k]) for k in peak}
    time.sleep(0.2)
print(peak["rss"] // 1024, peak["pss"] // 1024, " ".join(f"{k} {v // 1024}" for k, v in sorted(each.items())))
PY
  rss_pid=$!
}
pss_stop() {
  touch "$tmp/rss.stop"
  wait "$rss_pid"
  rm -f "$tmp/rss.stop"
}
