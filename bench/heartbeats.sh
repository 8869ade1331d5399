#!/usr/bin/env bash
# Load on Temporal from running scripts: the heartbeats the agent sends per second while
# MEMBERS scripts (default 1000) run for 70 s, as the agent's own log counts them.
#
# Two clusters in turn, on the embedded default. The first has quiet scripts and the
# default heartbeat timeout (30 s): the agent reports each once every 10 s. The baseline
# has the same scripts with a heartbeat timeout of 6 s, so each is reported every 2 s, as
# every script was before the agent skipped unchanged reports. A third cluster's scripts
# print a line every second: each new line is reported within 2 s, and status shows it.
#
#   bench/heartbeats.sh        # MEMBERS=500 bench/heartbeats.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-1000}
source "$root/bench/lib.sh"
# The agent logs its heartbeat counts at info.
start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level info

cat > "$tmp/quiet.sh" <<'SH'
#!/bin/sh
[ "$CLUSTERFLOW_EVENT" != configure ] || sleep 70
SH
cat > "$tmp/chatty.sh" <<'SH'
#!/bin/sh
[ "$CLUSTERFLOW_EVENT" = configure ] || exit 0
i=0
while [ $i -lt 70 ]; do i=$((i + 1)); echo "step $i"; sleep 1; done
SH
chmod +x "$tmp/quiet.sh" "$tmp/chatty.sh"

# measure NAME SCRIPT HEARTBEAT-TIMEOUT: deploys, and prints the agent's heartbeats per
# second over the minute the scripts all ran.
measure() {
  cat > "$tmp/$1.yaml" <<YAML
name: $1
roles:
  - name: worker
    members: $members
    startscript: $2
    heartbeatTimeout: $3
YAML
  local log=$tmp/data/agent/agent.log before
  before=$(grep -c "Heartbeats sent" "$log" 2>/dev/null || true)
  "$cf" deploy -f "$tmp/$1.yaml" --wait --timeout 10m > "$tmp/$1.out" || { cat "$tmp/$1.out"; exit 1; }
  # The agent reports once a minute; the fullest minute is the one the scripts all ran.
  grep "Heartbeats sent" "$log" | tail -n +$((before + 1)) |
    python3 -c 'import json, sys; print(max(json.loads(l[l.index("{"):])["perSecond"] for l in sys.stdin))'
}
quiet=$(measure quiet "$tmp/quiet.sh" 30s)
baseline=$(measure baseline "$tmp/quiet.sh" 6s)

cat > "$tmp/chatty.yaml" <<YAML
name: chatty
roles:
  - name: worker
    members: 20
    startscript: $tmp/chatty.sh
YAML
"$cf" deploy -f "$tmp/chatty.yaml" > /dev/null
sleep 20
lag=$("$cf" status chatty --members | python3 -c '
import re, sys
steps = [int(m.group(1)) for m in re.finditer(r"step (\d+)", sys.stdin.read())]
print(f"{len(steps)} scripts show their last line, at most {max(steps) - min(steps)} steps apart" if steps else "no last line shown")')

echo "$members quiet scripts running, heartbeats the agent sent per second (fullest minute)"
printf '  heartbeat timeout 30 s (default):   %6.1f/s\n' "$quiet"
printf '  baseline, reported every 2 s:       %6.1f/s   ratio %s\n' "$baseline" "$(python3 -c "print(f'{$quiet / $baseline:.2f}')")"
echo "  20 scripts printing a line a second, 20 s in: $lag"
