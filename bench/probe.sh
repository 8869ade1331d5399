#!/usr/bin/env bash
# Members' own checks (issue 43), on the embedded default:
#   1. the time from a killed service to its member down, and to a ready replacement, at
#      probe {every: 1s, failures: 2} and the least replaceAfter (1s), over TRIALS (3) kills;
#   2. what the host's agent pays for MEMBERS (1,000) members checked every second, against
#      the same members unchecked, in one run: its CPU (its own, and its checks' processes,
#      which it reaps) and its PSS over WINDOW (60) seconds of each, and the checks it ran.
#
#   bench/probe.sh          # MEMBERS=200 WINDOW=30 TRIALS=1 bench/probe.sh; MEMBERS=0: the kills only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-1000}
window=${WINDOW:-60}
trials=${TRIALS:-3}
source "$root/bench/lib.sh"
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

# A service its configure starts, and a check that it runs.
cat > "$tmp/service.sh" <<'SH'
#!/bin/sh
case "$CLUSTERFLOW_EVENT" in
configure) setsid sh -c 'echo $$ > service.pid; exec sleep 3600' </dev/null >/dev/null 2>&1 & ;;
check)
  # A killed service is a zombie until its parent, the host's init, reaps it, which kill -0
  # takes for alive: read its state instead.
  printf x >> checks
  read -r _ _ state _ < "/proc/$(cat service.pid 2>/dev/null)/stat" 2>/dev/null
  [ -n "${state:-}" ] && [ "$state" != Z ] || { echo "service is not running" >&2; exit 1; } ;;
teardown) kill "$(cat service.pid 2>/dev/null)" 2>/dev/null || true ;;
esac
exit 0
SH
chmod +x "$tmp/service.sh"
state_of() { "$cf" status "$1" -o json | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(' '.join(m['name'] + '=' + m['state'] for r in s['roles'] for m in r['members']))"; }

cat > "$tmp/kill.yaml" <<YAML
name: kill
roles:
  - {name: svc, members: 3, startscript: $tmp/service.sh, events: [configure, addnodes, delnodes, teardown, check], probe: {every: 1s, failures: 2}, replaceAfter: 1s}
YAML
"$cf" deploy -f "$tmp/kill.yaml" --wait > /dev/null
downs=() readies=()
for trial in $(seq "$trials"); do
  victim=$(state_of kill | tr ' ' '\n' | grep '=ready$' | head -n 1 | cut -d= -f1)
  dir=$(ls -d "$tmp"/data/clusters/kill@*/"$victim")
  start=$(ms)
  kill -9 "$(cat "$dir/service.pid")"
  # Down is seen as it passes: with replaceAfter 1s it is soon replacing, then gone.
  until ! state_of kill | grep -q "$victim=ready"; do sleep 0.05; done
  down_ms=$(( $(ms) - start ))
  until s=$(state_of kill) && ! grep -q "$victim=" <<< "$s" && [ "$(grep -o '=ready' <<< "$s" | wc -l)" = 3 ]; do sleep 0.05; done
  ready_ms=$(( $(ms) - start ))
  downs+=("$down_ms") readies+=("$ready_ms")
  printf '  trial %d: %s down after %d ms, replaced by a ready member after %d ms\n' "$trial" "$victim" "$down_ms" "$ready_ms"
done
"$cf" delete kill --wait > /dev/null

agent_pid() { cat "$tmp/data/agent/agent.pid"; }
# cpu_ticks PID: its own CPU and its reaped children's, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15, $16 + $17 }' "/proc/$1/stat"; }
pss_kb() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
# checks_run NAME: the checks run so far on the cluster's members (a byte each).
checks_run() { { cat "$tmp"/data/clusters/"$1"@*/*/checks 2>/dev/null || true; } | wc -c; }
# measure NAME PROBE: deploys MEMBERS members with or without checks, and prints the
# agent's CPU (own, children) in % of one CPU and its PSS in MiB over the window.
measure() {
  local name=$1 probe=$2 events="[configure, teardown]" pid own0 kids0 own1 kids1 checked
  [ -z "$probe" ] || events="[configure, teardown, check]"
  cat > "$tmp/$name.yaml" <<YAML
name: $name
roles:
  - {name: svc, members: $members, maxInFlight: 500, startscript: $tmp/service.sh, events: $events$probe}
YAML
  "$cf" deploy -f "$tmp/$name.yaml" --wait --timeout 10m > /dev/null
  sleep 5
  pid=$(agent_pid)
  read -r own0 kids0 < <(cpu_ticks "$pid")
  local checks0 hz
  checks0=$(checks_run "$name")
  sleep "$window"
  read -r own1 kids1 < <(cpu_ticks "$pid")
  hz=$(getconf CLK_TCK)
  checked=$(( ($(checks_run "$name") - checks0) / window ))
  printf '  %-10s agent CPU %5.1f%% own, %5.1f%% its checks; PSS %6.1f MiB; checks a second: %s\n' "$name" \
    "$(awk -v a="$own0" -v b="$own1" -v hz="$hz" -v w="$window" 'BEGIN { print (b - a) / hz / w * 100 }')" \
    "$(awk -v a="$kids0" -v b="$kids1" -v hz="$hz" -v w="$window" 'BEGIN { print (b - a) / hz / w * 100 }')" \
    "$(awk -v k="$(pss_kb "$pid")" 'BEGIN { print k / 1024 }')" "$checked"
  "$cf" delete "$name" --wait --timeout 10m > /dev/null
}

echo "a killed service at probe {every: 1s, failures: 2}, replaceAfter 1s ($trials trials):"
printf '  median: down after %d ms, a ready replacement after %d ms\n' \
  "$(printf '%s\n' "${downs[@]}" | median)" "$(printf '%s\n' "${readies[@]}" | median)"
[ "$members" -gt 0 ] || exit 0
echo "$members members, the agent over ${window}s (of one CPU; $(nproc) CPUs here):"
measure unchecked ""
measure checked ", probe: {every: 1s}"
