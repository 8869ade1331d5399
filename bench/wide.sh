#!/usr/bin/env bash
# Per-member cost (issue 29): one role of MEMBERS (2,001) members whose scripts do nothing,
# maxInFlight 500, deployed with `deploy --wait` on the embedded default, against the
# floor measured in the same run: the same script run by `xargs -P 500`, each in a folder
# of its own. Target: at most 2x the floor.
#
# With PROFILE=1 it takes a CPU profile of the dev process (server and worker) and the agent
# during the deploy, and TRACE=1 an execution trace of the dev process too (left in the
# kept folder, KEEP=1).
#
#   bench/wide.sh          # MEMBERS=500 bench/wide.sh; PROFILE=1 TRACE=1 KEEP=1 bench/wide.sh
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

spec wide "$members" > "$tmp/wide.yaml"
pss_start
profile_start "${PROFILE_SECONDS:-15}"
if [ -n "${TRACE:-}" ]; then
  for addr in "$CLUSTERFLOW_PPROF_DIR"/dev-*.addr; do
    curl -s -o "$CLUSTERFLOW_PPROF_DIR/$(basename "$addr" .addr).trace" "http://$(cat "$addr")/debug/pprof/trace?seconds=${TRACE_SECONDS:-5}" &
  done
fi
start=$(ms)
"$cf" deploy -f "$tmp/wide.yaml" --wait > "$tmp/deploy.out" || { cat "$tmp/deploy.out"; exit 1; }
deploy_ms=$(( $(ms) - start ))
pss_stop
workflow_ms=$("$cf" status wide -o json | status_ms)
runs=$(wc -l < "$tmp/wide.trace")
twice=$(sort "$tmp/wide.trace" | uniq -d | wc -l)

floor_ms=$(xargs_floor "$members" "$tmp/note.sh" "$tmp/floor.trace")

read -r _ pss _ < "$tmp/rss"
echo "$members members in one role, maxInFlight 500, 0 s scripts, on the embedded default"
printf '  floor, xargs -P 500, a folder each:  %7d ms\n' "$floor_ms"
printf '  deploy --wait:                       %7d ms   %s the floor\n' "$deploy_ms" "$(ratio "$deploy_ms" "$floor_ms")"
printf '  workflow clock:                      %7d ms   %s the floor\n' "$workflow_ms" "$(ratio "$workflow_ms" "$floor_ms")"
printf '  peak PSS during the deploy:          %7d MiB\n' "$pss"
printf '  configure runs: %d, run twice: %d\n' "$runs" "$twice"
[ "$runs" = "$members" ] && [ "$twice" = 0 ] || { echo "FAIL: every member must configure exactly once" >&2; exit 1; }
profile_report
