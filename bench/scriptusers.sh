#!/usr/bin/env bash
# The cost of script users (issue 25): one role of 200 members whose configure does
# nothing, deployed on a root worker that runs each cluster's scripts as a user of its own
# (--script-uids) and on one that runs them as itself, two servers side by side, taken in
# turns, in one run. Target: within 1.1x. Needs root.
#
#   bench/scriptusers.sh      # RUNS=5 MEMBERS=200 bench/scriptusers.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
members=${MEMBERS:-200}
[ "$(id -u)" -eq 0 ] || { echo "bench/scriptusers.sh needs root, to start scripts as other users" >&2; exit 1; }
source "$root/bench/lib.sh"
chmod 0711 "$tmp"   # the script users pass through to their sandboxes

plain=127.0.0.1:$(free_port)
users=127.0.0.1:$(free_port)
for way in plain users; do
  addr=$plain; [ $way = users ] && addr=$users
  mkdir -p "$tmp/$way"
  start_bg "dev-$way" "^Ready" dev --no-worker --no-ui --no-gateway --db "$tmp/$way/dev.db" --address "$addr" --log-level warn
  flags=(); [ $way = users ] && flags=(--script-uids 61000-61099)
  TEMPORAL_ADDRESS=$addr start_bg "worker-$way" "Worker starting" worker --data "$tmp/$way/data" --log-level info "${flags[@]}"
done

cf_at() { local addr=$plain; [ "$1" = users ] && addr=$users; shift; TEMPORAL_ADDRESS=$addr "$cf" "$@"; }
workflow_ms() { cf_at "$1" status "$2" -o json | status_ms; }
spec() {
  cat <<YAML
name: $1
roles:
  - {name: worker, members: $2, startscript: $tmp/noop.sh}
YAML
}
for way in plain users; do
  spec warmup 5 > "$tmp/warmup.yaml"
  cf_at $way deploy -f "$tmp/warmup.yaml" --wait > /dev/null
done
: > "$tmp/ms-plain"; : > "$tmp/ms-users"
for i in $(seq "$runs"); do
  order="plain users"; [ $((i % 2)) -eq 0 ] && order="users plain"
  for way in $order; do
    spec "wide-$i" "$members" > "$tmp/wide-$i.yaml"
    cf_at $way deploy -f "$tmp/wide-$i.yaml" --wait > /dev/null
    workflow_ms $way "wide-$i" >> "$tmp/ms-$way"
    cf_at $way delete "wide-$i" --wait > /dev/null
  done
done
p=$(median < "$tmp/ms-plain"); u=$(median < "$tmp/ms-users")
owner=$(stat -c %u "$tmp/users/data/clusters/"warmup@*/warmup-worker-0)
echo "$members x 0 s scripts on a root worker, workflow clock, median of $runs (sandboxes owned by uid $owner with --script-uids)"
printf '  as the worker (root):        %6d ms\n' "$p"
printf '  a user per cluster:          %6d ms   ratio %.3fx (target at most 1.1x)\n' "$u" "$(echo "$u / $p" | bc -l)"
