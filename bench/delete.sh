#!/usr/bin/env bash
# How long `delete --wait` takes at a random moment of a deploy.
#
# Deploys a 3-level cluster (1 -> 4 -> 2) whose configures take 1 s, deletes it 0.3-3.5 s
# in, and times `delete --wait` until the cluster is deleted: its scripts killed, teardown
# run, sandboxes removed. The baseline, measured in the same run, is `delete --wait` of the
# same cluster once it is ready with no script running. Target: every delete mid-setup under
# 3 s.
#
#   bench/delete.sh            # 8 rounds; RUNS=20 bench/delete.sh for more
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-8}
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, cardinality: "1", startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$2"}}
  - {name: worker, members: 4, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$2"}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$2"}}
YAML
}

# A delete at a random moment of a 3-level deploy whose configures take 1 s: its scripts are
# stopped at once (their agent told directly, not at its next heartbeat), torn down and
# removed. The baseline is the same delete once the cluster is ready.
: > "$tmp/midway"; : > "$tmp/idle"
for i in $(seq "$runs"); do
  spec "idle-$i" 0 > "$tmp/idle-$i.yaml"
  "$cf" deploy -f "$tmp/idle-$i.yaml" --wait > /dev/null
  start=$(ms)
  "$cf" delete "idle-$i" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/idle"

  spec "midway-$i" 1 > "$tmp/midway-$i.yaml"
  "$cf" deploy -f "$tmp/midway-$i.yaml" > /dev/null
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.3, 3.5), 2))')"
  start=$(ms)
  "$cf" delete "midway-$i" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/midway"
  if compgen -G "$tmp/data/clusters/midway-$i@*" >/dev/null; then echo "sandboxes left after the delete" >&2; exit 1; fi
done

idle=$(median < "$tmp/idle"); midway=$(median < "$tmp/midway"); worst=$(sort -n "$tmp/midway" | tail -1)
echo "delete --wait of a ready 3-level cluster (baseline): median ${idle} ms  ($(tr '\n' ' ' < "$tmp/idle")ms)"
echo "delete --wait at a random moment of its deploy:      median ${midway} ms, worst ${worst} ms  ($(tr '\n' ' ' < "$tmp/midway")ms)"
awk -v w="$worst" 'BEGIN { printf "target: every delete mid-setup under 3000 ms: %s\n", (w < 3000) ? "met" : "MISSED" }'
