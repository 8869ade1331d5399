#!/usr/bin/env bash
# Scale of detached startscripts on the embedded default.
#
# Deploys one role of 200 members whose configure sleeps 3s through `clusterflow dev`, and
# in the same run times two baselines from a shell: 200 bare `sleep 3`, and 200 runs of the
# same startscript, each under a wrapping shell as the agent runs it. Prints the wall times
# and ratios, the peak PSS of all clusterflow processes (server + worker in the dev
# process, and the agent), and how long after each script's exit the workflow saw it.
# Targets (issue 14): at most 1.3x the 3 s, peak PSS at most 300 MiB at 1000 scripts.
#
#   bench/scale.sh            # MEMBERS=500 SLEEP=5 bench/scale.sh for other sizes
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-200}
sleep_s=${SLEEP:-3}
source "$root/bench/lib.sh"

start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

pss_start

spec() {
  cat <<YAML
name: $1
roles:
  - name: worker
    members: $2
    startscript: $tmp/trace.sh
    env: {TRACE: $tmp/$1.trace, SLEEP: "$3"}
YAML
}
# Warm up (and start the agent) with a small cluster first.
spec warmup 5 0 > "$tmp/warmup.yaml"
"$cf" deploy -f "$tmp/warmup.yaml" --wait > /dev/null

spec scale "$members" "$sleep_s" > "$tmp/scale.yaml"
profile_start "${PROFILE_SECONDS:-20}"
start=$(ms)
"$cf" deploy -f "$tmp/scale.yaml" --wait > "$tmp/deploy.out" || { cat "$tmp/deploy.out"; exit 1; }
deploy_ms=$(( $(ms) - start ))
pss_stop
"$cf" status scale -o json > "$tmp/status.json"

start=$(ms)
pids=()
for _ in $(seq "$members"); do sleep "$sleep_s" & pids+=($!); done
wait "${pids[@]}"
shell_ms=$(( $(ms) - start ))

# The same startscript, each under a shell that keeps its exit status as the agent's
# wrapper does: what the machine needs for the scripts themselves (the trace's date calls
# and the wrapper are 4 more process starts per member than a bare sleep).
mkdir -p "$tmp/floor"
start=$(ms)
pids=()
for i in $(seq "$members"); do
  TRACE="$tmp/floor.trace" SLEEP="$sleep_s" CLUSTERFLOW_MEMBER="m$i" CLUSTERFLOW_EVENT=configure \
    sh -c '"$0"; echo $? > "$1"' "$tmp/trace.sh" "$tmp/floor/m$i.exit" & pids+=($!)
done
wait "${pids[@]}"
script_ms=$(( $(ms) - start ))

python3 - "$tmp/status.json" "$tmp/scale.trace" "$deploy_ms" "$shell_ms" "$(cat "$tmp/rss")" "$members" "$sleep_s" "$script_ms" <<'PY'
import json, sys
from datetime import datetime
status, trace, deploy_ms, shell_ms, rss, members, sleep_s, script_ms = sys.argv[1:]
rss, pss, *each = rss.split()
each = ", ".join(f"{each[i]} {each[i + 1]} MiB" for i in range(0, len(each), 2))
s = json.load(open(status))
ts = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
ends = {}
for line in open(trace):
    kind, at, member, _ = line.split()
    if kind == "end":
        ends[member] = float(at)
ready = {m["name"]: ts(m["since"]) for r in s["roles"] for m in r["members"] if m["state"] == "ready"}
lat = sorted((ready[m] - ends[m]) * 1000 for m in ready if m in ends)
workflow_ms = (ts(s["updatedAt"]) - ts(s["createdAt"])) * 1000
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{members} members, configure sleeps {sleep_s}s, one role, on the embedded default")
print(f"  shell, {members} x sleep {sleep_s} in parallel:  {int(shell_ms):6d} ms")
print(f"  shell, the same script, wrapped:     {int(script_ms):6d} ms")
print(f"  clusterflow (workflow clock):        {int(workflow_ms):6d} ms   ratio {workflow_ms / int(shell_ms):.2f}x to bare sleeps, {workflow_ms / int(script_ms):.2f}x to the same script")
print(f"  clusterflow deploy --wait:           {int(deploy_ms):6d} ms   (adds CLI start-up and polling)")
print(f"  peak memory, server+worker+agent:    {int(pss):6d} MiB PSS, {int(rss)} MiB RSS summed (RSS alone: {each})")
print(f"  script exit -> workflow saw it:      median {pct(0.5):.0f} ms, p90 {pct(0.9):.0f} ms, max {lat[-1]:.0f} ms ({len(lat)} members)")
PY
profile_report
