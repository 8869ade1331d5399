#!/usr/bin/env bash
# Orchestration overhead of a deploy on the embedded default.
#
# Deploys a 3-level cluster (1 controller -> 8 workers -> 2 edge) whose startscripts do
# nothing, through `clusterflow dev`, and in the same run times the same script run
# directly by a shell, level by level (each level's members in parallel). Prints both,
# their ratio (the median of the rounds' ratios, each round a pair, and their spread), and
# the overhead per level, on a quiet machine (require_quiet). Target: at most 100 ms per level.
#
#   bench/deploy.sh            # 5 rounds; RUNS=20 bench/deploy.sh for more
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-5}
levels=3
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn


workflow_ms() { "$cf" status "$1" -o json | status_ms; }

# run_level N runs the script N times in parallel, as one level of members.
run_level() {
  local pids=()
  for _ in $(seq "$1"); do (cd "$tmp" && ./noop.sh --configure) & pids+=($!); done
  wait "${pids[@]}"
}


# Warm up the worker and server once before measuring.
levels_spec warmup > "$tmp/warmup.yaml"
"$cf" deploy -f "$tmp/warmup.yaml" --wait > /dev/null
require_quiet

# Each round is a pair: the deploy, then its floor, the shell's levels.
: > "$tmp/cli"; : > "$tmp/workflow"; : > "$tmp/shell"
for i in $(seq "$runs"); do
  levels_spec "bench-$i" > "$tmp/bench-$i.yaml"
  start=$(ms)
  "$cf" deploy -f "$tmp/bench-$i.yaml" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/cli"
  workflow_ms "bench-$i" >> "$tmp/workflow"

  start=$(ms)
  run_level 1; run_level 8; run_level 2
  echo $(( $(ms) - start )) >> "$tmp/shell"
done

shell=$(median < "$tmp/shell")
workflow=$(median < "$tmp/workflow")
cli=$(median < "$tmp/cli")
echo "3 levels (1 -> 8 -> 2 members), no-op startscripts, median of $runs runs"
printf '  shell, level by level:         %5d ms\n' "$shell"
printf '  clusterflow (workflow clock):  %5d ms   %s   overhead %d ms/level%s\n' "$workflow" \
  "$(pair_ratios "$tmp/shell" "$tmp/workflow")" $(( (workflow - shell) / levels )) "$loaded"
printf '  clusterflow deploy --wait:     %5d ms   %s   (adds CLI start-up and status polling: %d ms over the workflow clock)%s\n' "$cli" \
  "$(pair_ratios "$tmp/shell" "$tmp/cli")" $(( cli - workflow )) "$loaded"
