#!/usr/bin/env bash
# How long replacing a member reported gone takes, against growing the role by one.
#
# Deploys a controller and 4 workers (no-op startscripts), then in each round reports a
# worker gone (`signal ... gone`, then `status --wait` until the cluster is ready again:
# the successor configured, the old member removed, the survivors told with addnodes and
# delnodes). The baseline, measured in the same run on a fresh cluster of the same shape, is
# `resize worker=5 --wait`: one new member configured and announced, nothing removed.
#
#   bench/replace.sh           # 3 rounds; RUNS=10 bench/replace.sh for more
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, cardinality: "1", startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
  - {name: worker, members: 4, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
YAML
}

: > "$tmp/grow"; : > "$tmp/replace"
for i in $(seq "$runs"); do
  spec "grow-$i" > "$tmp/grow-$i.yaml"
  "$cf" deploy -f "$tmp/grow-$i.yaml" --wait > /dev/null
  start=$(ms)
  "$cf" resize "grow-$i" worker=5 --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/grow"
  "$cf" delete "grow-$i" > /dev/null

  spec "replace-$i" > "$tmp/replace-$i.yaml"
  "$cf" deploy -f "$tmp/replace-$i.yaml" --wait > /dev/null
  start=$(ms)
  "$cf" signal "replace-$i" "replace-$i-worker-1" gone > /dev/null
  "$cf" status "replace-$i" --wait > /dev/null
  echo $(( $(ms) - start )) >> "$tmp/replace"
  if compgen -G "$tmp/data/clusters/replace-$i@*/replace-$i-worker-1" >/dev/null || ! compgen -G "$tmp/data/clusters/replace-$i@*/replace-$i-worker-4" >/dev/null; then
    echo "the sandboxes do not show the replacement" >&2; exit 1
  fi
  grep -q "replace-$i-controller-0 addnodes" "$tmp/replace-$i.trace" || { echo "no addnodes for the successor" >&2; exit 1; }
  "$cf" delete "replace-$i" > /dev/null
done

grow=$(median < "$tmp/grow"); replace=$(median < "$tmp/replace")
echo "resize worker 4 → 5 --wait (baseline):  median ${grow} ms  ($(tr '\n' ' ' < "$tmp/grow")ms)"
echo "signal gone until ready again:         median ${replace} ms  ($(tr '\n' ' ' < "$tmp/replace")ms)"
awk -v r="$replace" -v g="$grow" 'BEGIN { printf "ratio replacement / grow by one: %.2f\n", r / g }'
