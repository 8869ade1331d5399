#!/usr/bin/env bash
# How long `delete --wait` takes in the middle of a long setup.
#
# Deploys a controller whose configure sleeps 60 s (with 4 workers waiting on it), deletes
# the cluster while that script runs, and times `delete --wait` until the cluster is
# deleted: the script killed, teardown run, sandboxes removed. The baseline, measured in
# the same run, is `delete --wait` of the same cluster once it is ready with no script
# running. Target: under 10 s mid-setup.
#
#   bench/delete.sh            # 3 rounds; RUNS=10 bench/delete.sh for more
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, cardinality: "1", startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$2"}}
  - {name: worker, members: 4, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
YAML
}

: > "$tmp/midway"; : > "$tmp/idle"
for i in $(seq "$runs"); do
  spec "idle-$i" 0 > "$tmp/idle-$i.yaml"
  "$cf" deploy -f "$tmp/idle-$i.yaml" --wait > /dev/null
  start=$(ms)
  "$cf" delete "idle-$i" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/idle"

  spec "midway-$i" 60 > "$tmp/midway-$i.yaml"
  "$cf" deploy -f "$tmp/midway-$i.yaml" > /dev/null
  for _ in $(seq 100); do [ -s "$tmp/midway-$i.trace" ] && break; sleep 0.1; done
  sleep 1 # well into the script
  start=$(ms)
  "$cf" delete "midway-$i" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/midway"
  if grep -q worker "$tmp/midway-$i.trace"; then echo "a worker was set up during the delete" >&2; exit 1; fi
  if [ -d "$tmp/data/clusters/midway-$i" ]; then echo "sandboxes left after the delete" >&2; exit 1; fi
done

idle=$(median < "$tmp/idle"); midway=$(median < "$tmp/midway")
echo "delete --wait of a ready cluster (baseline):  median ${idle} ms  ($(tr '\n' ' ' < "$tmp/idle")ms)"
echo "delete --wait during a 60 s configure:        median ${midway} ms  ($(tr '\n' ' ' < "$tmp/midway")ms)"
awk -v m="$midway" -v i="$idle" 'BEGIN { printf "ratio mid-setup / baseline: %.2f; target under 10000 ms: %s\n", m / i, (m < 10000) ? "met" : "MISSED" }'
