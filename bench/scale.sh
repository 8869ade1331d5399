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

require_quiet
# PAIRS rounds (default 5), each a deploy of a cluster of its own (deleted after, untimed)
# and then the two floors; the first deploy alone is profiled and its memory sampled.
pairs=${PAIRS:-5}
: > "$tmp/deploy.ms"; : > "$tmp/workflow.ms"; : > "$tmp/shell.ms"; : > "$tmp/script.ms"
for i in $(seq "$pairs"); do
  spec "scale-$i" "$members" "$sleep_s" > "$tmp/scale-$i.yaml"
  [ "$i" = 1 ] && profile_start "${PROFILE_SECONDS:-20}"
  start=$(ms)
  "$cf" deploy -f "$tmp/scale-$i.yaml" --wait > "$tmp/deploy.out" || { cat "$tmp/deploy.out"; exit 1; }
  echo $(( $(ms) - start )) >> "$tmp/deploy.ms"
  [ "$i" != 1 ] || pss_stop
  "$cf" status "scale-$i" -o json > "$tmp/status-$i.json"
  status_ms < "$tmp/status-$i.json" >> "$tmp/workflow.ms"
  "$cf" delete "scale-$i" --wait > /dev/null

  start=$(ms)
  pids=()
  for _ in $(seq "$members"); do sleep "$sleep_s" & pids+=($!); done
  wait "${pids[@]}"
  echo $(( $(ms) - start )) >> "$tmp/shell.ms"

  # The same startscript, each under a shell that keeps its exit status as the agent's
  # wrapper does: what the machine needs for the scripts themselves (the trace's date calls
  # and the wrapper are 4 more process starts per member than a bare sleep).
  rm -rf "$tmp/floor" && mkdir -p "$tmp/floor"
  start=$(ms)
  pids=()
  for m in $(seq "$members"); do
    TRACE="$tmp/floor.trace" SLEEP="$sleep_s" CLUSTERFLOW_MEMBER="m$m" CLUSTERFLOW_EVENT=configure \
      sh -c '"$0"; echo $? > "$1"' "$tmp/trace.sh" "$tmp/floor/m$m.exit" & pids+=($!)
  done
  wait "${pids[@]}"
  echo $(( $(ms) - start )) >> "$tmp/script.ms"
done
deploy_ms=$(median < "$tmp/deploy.ms")
shell_ms=$(median < "$tmp/shell.ms")
script_ms=$(median < "$tmp/script.ms")
cp "$tmp/status-1.json" "$tmp/status.json"
cp "$tmp/scale-1.trace" "$tmp/scale.trace"
echo "$pairs pairs; the workflow clock against the same script wrapped: $(pair_ratios "$tmp/script.ms" "$tmp/workflow.ms")$loaded; against bare sleeps: $(pair_ratios "$tmp/shell.ms" "$tmp/workflow.ms")"

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
    kind, at, member, event = line.split()
    if kind == "end" and event == "configure":  # the delete after adds teardowns
        ends[member] = float(at)
ready = {m["name"]: ts(m["since"]) for r in s["roles"] for m in r["members"] if m["state"] == "ready"}
lat = sorted((ready[m] - ends[m]) * 1000 for m in ready if m in ends)
workflow_ms = (ts(s["updatedAt"]) - ts(s["createdAt"])) * 1000  # the first pair's
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{members} members, configure sleeps {sleep_s}s, one role, on the embedded default")
print(f"  shell, {members} x sleep {sleep_s} in parallel:  {int(shell_ms):6d} ms median")
print(f"  shell, the same script, wrapped:     {int(script_ms):6d} ms median")
print(f"  clusterflow (workflow clock), 1st:   {int(workflow_ms):6d} ms   (the medians of the pairs' ratios are above)")
print(f"  clusterflow deploy --wait:           {int(deploy_ms):6d} ms median   (adds CLI start-up and polling)")
print(f"  peak memory, server+worker+agent:    {int(pss):6d} MiB PSS, {int(rss)} MiB RSS summed (RSS alone: {each})")
print(f"  script exit -> workflow saw it, 1st: median {pct(0.5):.0f} ms, p90 {pct(0.9):.0f} ms, max {lat[-1]:.0f} ms ({len(lat)} members)")
PY
profile_report
