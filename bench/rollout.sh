#!/usr/bin/env bash
# Rollouts on the embedded default (issue 28).
#
# 1. An in-place rollout of MEMBERS (200) members whose upgrade sleeps 1 s, with canaries 1,
#    maxInFlight 50 and watch 0s, timed from `apply` to `rollout status --wait`, and by the
#    workflow's own clock (the rollout's start to its end). Its floor, measured in the same
#    run: the same script run by a shell in the same order, the canary alone and then the
#    batches of 50 in parallel, one after another. Target: at most 1.5x the floor.
# 2. How long a down report about a member in its watch takes to pause the rollout, by the
#    workflow's clock (the report's transition to the rollout's pausedAt), and as a user
#    sees it (from running `signal` to the first `status` that shows the pause), over
#    ROUNDS (5) reports. Target: at most 1 s.
#
#   bench/rollout.sh           # MEMBERS=400 BATCH=100 bench/rollout.sh for other sizes
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-200}
batch=${BATCH:-50}
rounds=${ROUNDS:-5}
source "$root/bench/lib.sh"

start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

cat > "$tmp/roll.sh" <<'SH'
#!/bin/sh
echo "start $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
[ "$CLUSTERFLOW_EVENT" != upgrade ] || sleep "${UP_SLEEP:-0}"
echo "end $(date +%s.%N) $CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT" >> "$TRACE"
SH
chmod +x "$tmp/roll.sh"

# spec NAME MEMBERS WATCH VERSION
spec() {
  cat <<YAML
name: $1
roles:
  - name: worker
    members: $2
    startscript: $tmp/roll.sh
    events: [configure, addnodes, delnodes, teardown, upgrade]
    env: {TRACE: $tmp/$1.trace, UP_SLEEP: "1", VERSION: "$4"}
    update: {canaries: 1, maxInFlight: $batch, watch: $3}
YAML
}

spec roll "$members" 0s 1 > "$tmp/v1.yaml"
spec roll "$members" 0s 2 > "$tmp/v2.yaml"
"$cf" deploy -f "$tmp/v1.yaml" --wait > /dev/null
start=$(ms)
"$cf" apply -f "$tmp/v2.yaml" > /dev/null
"$cf" rollout status roll --wait > "$tmp/rollout.out" || { cat "$tmp/rollout.out"; exit 1; }
cli_ms=$(( $(ms) - start ))
"$cf" status roll -o json > "$tmp/roll.json"

# The floor: the same script, the canary alone, then batches of $batch at once.
floor_run() { TRACE="$tmp/floor.trace" UP_SLEEP=1 CLUSTERFLOW_MEMBER="m$1" CLUSTERFLOW_EVENT=upgrade sh -c '"$0"; echo $? > /dev/null' "$tmp/roll.sh"; }
start=$(ms)
floor_run 0
left=$(( members - 1 )); i=1
while [ "$left" -gt 0 ]; do
  n=$(( left < batch ? left : batch ))
  pids=()
  for _ in $(seq "$n"); do floor_run "$i" & pids+=($!); i=$(( i + 1 )); done
  wait "${pids[@]}"
  left=$(( left - n ))
done
floor_ms=$(( $(ms) - start ))

# The health gate: a small rollout with a long watch, reported down while the canary is in it.
latencies=()
seen=()
for r in $(seq "$rounds"); do
  spec "gate$r" 4 10m 1 > "$tmp/g1.yaml"
  spec "gate$r" 4 10m 2 > "$tmp/g2.yaml"
  "$cf" deploy -f "$tmp/g1.yaml" --wait > /dev/null
  "$cf" apply -f "$tmp/g2.yaml" > /dev/null
  for _ in $(seq 600); do
    "$cf" status "gate$r" -o json | python3 -c 'import json,sys; s=json.load(sys.stdin); r=s.get("rollout") or {}; sys.exit(0 if any(x.get("inWatch") for x in r.get("roles") or []) else 1)' && break
    sleep 0.1
  done
  sent=$(ms)
  "$cf" signal "gate$r" "gate$r-worker-0" down > /dev/null
  for _ in $(seq 100); do
    "$cf" status "gate$r" -o json > "$tmp/gate.json"
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["phase"] == "rollout-paused" else 1)' "$tmp/gate.json" && break
    sleep 0.1
  done
  seen+=("$(( $(ms) - sent ))")
  latencies+=("$(python3 - "$tmp/gate.json" "gate$r-worker-0" <<'PY'
import json, sys
from datetime import datetime
s, member = json.load(open(sys.argv[1])), sys.argv[2]
t = lambda v: datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
m = next(m for r in s["roles"] for m in r["members"] if m["name"] == member)
down = next(x for x in m["health"]["transitions"] if x["event"] == "down")
print(round((t(s["rollout"]["pausedAt"]) - t(down["at"])) * 1000))
PY
)")
  "$cf" delete "gate$r" > /dev/null
done

python3 - "$tmp/roll.json" "$cli_ms" "$floor_ms" "$members" "$batch" "${latencies[*]}" "${seen[*]}" <<'PY'
import json, sys
from datetime import datetime
status, cli_ms, floor_ms, members, batch, lat, seen = sys.argv[1:]
seen = sorted(int(x) for x in seen.split())
s = json.load(open(status))
t = lambda v: datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
ro = s["rollout"]
wf_ms = (t(ro["ended"]) - t(ro["started"])) * 1000
lat = sorted(int(x) for x in lat.split())
print(f"in-place rollout of {members} members, upgrade sleeps 1 s, canaries 1, maxInFlight {batch}, watch 0s")
print(f"  shell floor (canary, then batches):   {int(floor_ms):6d} ms")
print(f"  clusterflow, workflow clock:          {int(wf_ms):6d} ms   ratio {wf_ms / int(floor_ms):.2f}x")
print(f"  clusterflow, apply to status --wait:  {int(cli_ms):6d} ms   ratio {int(cli_ms) / int(floor_ms):.2f}x (adds CLI start-up and polling)")
print(f"  down report -> rollout paused:        median {lat[len(lat)//2]} ms, max {lat[-1]} ms over {len(lat)} reports (workflow clock)")
print(f"  signal sent -> status shows paused:   median {seen[len(seen)//2]} ms, max {seen[-1]} ms (two CLI runs, signal and status)")
PY
