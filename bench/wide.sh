#!/usr/bin/env bash
# Per-member cost (issue 29): one role of MEMBERS (2,001) members whose scripts do nothing,
# maxInFlight 500, deployed with `deploy --wait` on the embedded default, against the
# floor measured in the same run: the same script run by `xargs -P 500`, each in a folder
# of its own. Floor and deploy are taken in turn, PAIRS pairs (default 5), on a quiet
# machine (require_quiet); it prints the median ratio and its spread. Target: at most 2x.
#
# With PROFILE=1 it takes a CPU profile of the dev process (server and worker) and the agent
# during the deploy, and TRACE=1 an execution trace of the dev process too (left in the
# kept folder, KEEP=1).
#
#   bench/wide.sh          # MEMBERS=500 PAIRS=3 bench/wide.sh; PROFILE=1 TRACE=1 KEEP=1 bench/wide.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-2001}
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

cat > "$tmp/note.sh" <<'SH'
#!/bin/sh
echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
SH
chmod +x "$tmp/note.sh"
spec() {
  cat <<YAML
name: $1
roles:
  - name: worker
    members: $2
    maxInFlight: 500
    startscript: $tmp/note.sh
    env: {TRACE: $tmp/$1.trace}
YAML
}
spec warmup 5 > "$tmp/warmup.yaml"
"$cf" deploy -f "$tmp/warmup.yaml" --wait > /dev/null
require_quiet

# One pair: the floor, then a deploy of a cluster of its own (deleted after, untimed). The
# first deploy alone is profiled and its memory sampled.
pairs=${PAIRS:-5}
: > "$tmp/floor.ms"; : > "$tmp/deploy.ms"; : > "$tmp/workflow.ms"
for i in $(seq "$pairs"); do
  xargs_floor "$members" "$tmp/note.sh" "$tmp/floor.trace" >> "$tmp/floor.ms"
  spec "wide-$i" "$members" > "$tmp/wide-$i.yaml"
  if [ "$i" = 1 ]; then
    pss_start
    profile_start "${PROFILE_SECONDS:-15}"
    if [ -n "${TRACE:-}" ]; then
      for addr in "$CLUSTERFLOW_PPROF_DIR"/dev-*.addr; do
        curl -s -o "$CLUSTERFLOW_PPROF_DIR/$(basename "$addr" .addr).trace" "http://$(cat "$addr")/debug/pprof/trace?seconds=${TRACE_SECONDS:-5}" &
      done
    fi
  fi
  start=$(ms)
  "$cf" deploy -f "$tmp/wide-$i.yaml" --wait > "$tmp/deploy.out" || { cat "$tmp/deploy.out"; exit 1; }
  echo $(( $(ms) - start )) >> "$tmp/deploy.ms"
  [ "$i" != 1 ] || pss_stop
  "$cf" status "wide-$i" -o json | status_ms >> "$tmp/workflow.ms"
  runs=$(wc -l < "$tmp/wide-$i.trace")
  twice=$(sort "$tmp/wide-$i.trace" | uniq -d | wc -l)
  [ "$runs" = "$members" ] && [ "$twice" = 0 ] || { echo "FAIL: every member must configure exactly once (pair $i: $runs runs, $twice twice)" >&2; exit 1; }
  "$cf" delete "wide-$i" --wait > /dev/null
done

read -r _ pss _ < "$tmp/rss"
echo "$members members in one role, maxInFlight 500, 0 s scripts, on the embedded default, $pairs pairs"
printf '  floor, xargs -P 500, a folder each:  %7d ms median (%s)\n' "$(median < "$tmp/floor.ms")" "$(tr '\n' ' ' < "$tmp/floor.ms")"
printf '  deploy --wait:                       %7d ms median   %s%s\n' "$(median < "$tmp/deploy.ms")" "$(pair_ratios "$tmp/floor.ms" "$tmp/deploy.ms")" "$loaded"
printf '  workflow clock:                      %7d ms median   %s%s\n' "$(median < "$tmp/workflow.ms")" "$(pair_ratios "$tmp/floor.ms" "$tmp/workflow.ms")" "$loaded"
printf '  peak PSS during the first deploy:    %7d MiB\n' "$pss"
printf '  configure runs: %d per pair, none twice\n' "$members"
profile_report
