# Shared by the bench scripts: build the binary, start `clusterflow dev`, clean up after.
# Expects $root; sets $tmp and $cf, and exports TEMPORAL_ADDRESS.
tmp=$(mktemp -d)
cf=$tmp/clusterflow
bg_pids=()
# cleanup must not stop at a process that is already gone, which set -e would do.
cleanup() {
  set +e
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # The agent is detached from the worker on purpose; stop it and anything left.
  for data in "$tmp"/data*; do
    [ -f "$data/agent/agent.pid" ] && kill -9 "$(cat "$data/agent/agent.pid")" 2>/dev/null
  done
  [ -n "${KEEP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

echo "building clusterflow..." >&2
(cd "$root" && go build -o "$cf" ./cmd/clusterflow)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export TEMPORAL_ADDRESS=127.0.0.1:$(free_port)

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

ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%d\n", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# A startscript that logs its start and end (epoch seconds) to $TRACE and sleeps $SLEEP.
cat > "$tmp/trace.sh" <<'SH'
#!/bin/sh
echo "start $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
[ "$CLUSTERFLOW_EVENT" != configure ] || sleep "${SLEEP:-0}"
echo "end $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
SH
chmod +x "$tmp/trace.sh"

# With PROFILE=1, every clusterflow process serves pprof on loopback (internal/profiling);
# profile_start SECONDS takes a CPU profile of each while the benchmark runs, and
# profile_report prints each one's top functions.
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
    curl -s -o "$CLUSTERFLOW_PPROF_DIR/$name.cpu" "http://$(cat "$addr")/debug/pprof/profile?seconds=$1" &
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
}
