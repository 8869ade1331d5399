#!/usr/bin/env bash
# How fast work resumes after the worker is killed.
#
# A controller's configure (2s) runs while its worker is killed with SIGKILL; the agent
# completes the activity without any worker. Once the script has ended, a new worker is
# started, and this measures from that start to the next level's first script starting.
# The baseline, measured in the same run without a kill, is the gap from the controller's
# script ending to the next level's first script starting. Target: a few seconds at most.
#
#   bench/restart.sh           # 3 rounds; RUNS=5 bench/restart.sh for more
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
source "$root/bench/lib.sh"

start_bg dev "^Ready" dev --no-worker --no-ui --no-gateway --db "$tmp/dev.db" --address "$TEMPORAL_ADDRESS" --log-level warn
start_bg worker-0 "Worker starting" worker --data "$tmp/data" --log-level info
worker_pid=$last_pid

spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, members: 1, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "2"}}
  - {name: worker, members: 1, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
YAML
}
# at KIND MEMBER-PREFIX TRACE: the epoch time (ms) of the first matching trace line.
at() { awk -v k="$1" -v m="$2" '$1 == k && index($3, m) == 1 {printf "%.0f\n", $2 * 1000; exit}' "$3" 2>/dev/null; }
wait_trace() { for _ in $(seq 600); do [ -n "$(at "$@")" ] && return; sleep 0.05; done; echo "timed out waiting for $*" >&2; exit 1; }

: > "$tmp/baseline"; : > "$tmp/resume"
for i in $(seq "$runs"); do
  spec "base-$i" > "$tmp/base-$i.yaml"
  "$cf" deploy -f "$tmp/base-$i.yaml" --wait > /dev/null
  echo $(( $(at start base-$i-worker "$tmp/base-$i.trace") - $(at end base-$i-controller "$tmp/base-$i.trace") )) >> "$tmp/baseline"

  spec "kill-$i" > "$tmp/kill-$i.yaml"
  "$cf" deploy -f "$tmp/kill-$i.yaml" > /dev/null
  wait_trace start kill-$i-controller "$tmp/kill-$i.trace"
  kill -9 "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
  wait_trace end kill-$i-controller "$tmp/kill-$i.trace"
  sleep 1 # the agent delivers the result meanwhile; nothing can act on it without a worker
  start=$(ms)
  start_bg "worker-$i" "Worker starting" worker --data "$tmp/data" --log-level info
  worker_pid=$last_pid
  wait_trace start kill-$i-worker "$tmp/kill-$i.trace"
  echo $(( $(at start kill-$i-worker "$tmp/kill-$i.trace") - start )) >> "$tmp/resume"
  "$cf" status "kill-$i" --wait > /dev/null
done

base=$(median < "$tmp/baseline")
resume=$(median < "$tmp/resume")
echo "worker killed during a 2s configure, median of $runs runs"
printf '  next level starts after the script ends, no kill:       %6s ms\n' "$base"
printf '  next level starts after a new worker starts (from exec): %6s ms   ratio %.1fx\n' "$resume" "$(echo "$resume / ($base + 0.001)" | bc -l)"
echo "  (the second includes the new worker process starting up and connecting)"
