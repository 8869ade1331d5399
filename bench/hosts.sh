#!/usr/bin/env bash
# Hosts: a wide deploy over three hosts, a host's loss, and a drain, each against a
# baseline measured in the same run.
#
# Three `clusterflow worker --host` processes on this machine (loopback, a data folder
# each) serve one `clusterflow dev --no-worker` server.
#   1. 300 members whose configure sleeps 3 s, spread over the 3 hosts: `deploy --wait`
#      against the 3 s floor. Target: at most 1.3x.
#   2. A host's worker, agent and scripts killed: until its members show down, against
#      --host-timeout + 2 s; then from replaceAfter expiring (members replacing) until the
#      replacements are ready, against growing the role by as many members. Target: 1.5x.
#   3. A drain of a host holding 20 members, against the same 20 members reported gone.
#   4. A host killed at a random moment of a 3-level deploy, 10 trials: until the cluster
#      is ready without it, against the same deploy on two hosts from the start.
#   5. A host's worker killed, until it is taken for lost: the detection window.
#
#   bench/hosts.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
host_timeout=5
start_bg dev "^Ready" dev --no-ui --no-gateway --no-worker --db "$tmp/dev.db" --address "$TEMPORAL_ADDRESS" --log-level warn
"$cf" setup > /dev/null
declare -A host_pid
start_host() {
  start_bg "host-$1" "Worker starting" worker --host "$1" --data "$tmp/data-$1" --host-timeout "${host_timeout}s"
  host_pid[$1]=$last_pid
}
for h in h1 h2 h3; do start_host "$h"; done
until "$cf" hosts | grep -c " ready " | grep -q 3; do sleep 0.2; done

# count_state CLUSTER STATE: members of the cluster in that state.
count_state() {
  "$cf" status "$1" -o json | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(sum(m['state'] == '$2' for r in s['roles'] for m in r['members']))"
}
# on_host CLUSTER HOST: members of the cluster placed on the host.
on_host() {
  "$cf" status "$1" -o json | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(' '.join(m['name'] for r in s['roles'] for m in r['members'] if m.get('host') == '$2' and m['state'] == 'ready'))"
}
wait_until() { # wait_until SECONDS CMD...: poll until CMD succeeds
  local limit=$(( $(ms) + $1 * 1000 )); shift
  until "$@"; do [ "$(ms)" -lt "$limit" ] || { echo "timed out: $*" >&2; exit 1; }; sleep 0.1; done
}
spec() { # spec NAME MEMBERS SLEEP [EXTRA]
  cat <<YAML
name: $1
roles:
  - {name: worker, members: $2, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$3"}${4:-}}
YAML
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# 1. A wide deploy.
spec wide 300 3 > "$tmp/wide.yaml"
start=$(ms)
"$cf" deploy -f "$tmp/wide.yaml" --wait > /dev/null
wide=$(( $(ms) - start ))
per_host=$(for h in h1 h2 h3; do ls "$tmp/data-$h"/clusters/wide@* | grep -c wide-worker; done | tr '\n' ' ')
echo "1. 300 members, 3 s configure, over 3 hosts (members per host: $per_host)"
echo "   deploy --wait: ${wide} ms; floor 3000 ms; ratio $(ratio "$wide" 3000) (target 1.3)"
"$cf" delete wide --wait > /dev/null
# The same members on one host (the others cordoned), to tell routing from spreading.
"$cf" host cordon h2 > /dev/null; "$cf" host cordon h3 > /dev/null
spec narrow 300 3 > "$tmp/narrow.yaml"
start=$(ms)
"$cf" deploy -f "$tmp/narrow.yaml" --wait > /dev/null
narrow=$(( $(ms) - start ))
echo "   the same 300 members on one host: ${narrow} ms; ratio $(ratio "$narrow" 3000)"
"$cf" delete narrow --wait > /dev/null
"$cf" host uncordon h2 > /dev/null; "$cf" host uncordon h3 > /dev/null

# 2. A host lost: 6 members, 2 per host.
spec lossy 6 0 ", replaceAfter: 5s, maxUnavailable: \"50%\"" > "$tmp/lossy.yaml"
"$cf" deploy -f "$tmp/lossy.yaml" --wait > /dev/null
victims=$(on_host lossy h3 | wc -w)
start=$(ms)
kill -9 "${host_pid[h3]}"
[ -f "$tmp/data-h3/agent/agent.pid" ] && kill -9 "$(cat "$tmp/data-h3/agent/agent.pid")" 2>/dev/null || true
# down_since CLUSTER N: once N members are down, the latest time one went down (the
# workflow's clock, epoch seconds); nothing before.
down_since() {
  "$cf" status "$1" -o json | python3 -c "
import json, sys
from datetime import datetime
s = json.load(sys.stdin)
down = [datetime.fromisoformat(m['since'].replace('Z', '+00:00')).timestamp() for r in s['roles'] for m in r['members'] if m['state'] == 'down']
if len(down) >= $2: print(max(down))"
}
down_at=""
limit=$(( $(ms) + 60000 ))
while [ -z "$down_at" ]; do
  [ "$(ms)" -lt "$limit" ] || { echo "timed out waiting for lossy's members down" >&2; exit 1; }
  down_at=$(down_since lossy "$victims")
done
detect=$(( $(ms) - start ))
# On the workflow's clock: from replaceAfter expiring (5 s after the members went down) to
# the last replacement ready.
replacements_ready() {
  [ "$("$cf" status lossy -o json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sum(1 for r in s["roles"] for m in r["members"] if m.get("replaces") and m["state"] == "ready") if s["phase"] == "ready" else 0)')" -ge "$victims" ]
}
wait_until 120 replacements_ready
replaced=$("$cf" status lossy -o json | python3 -c '
import json, sys
from datetime import datetime
s = json.load(sys.stdin)
ready = max(datetime.fromisoformat(m["since"].replace("Z", "+00:00")).timestamp() for r in s["roles"] for m in r["members"] if m.get("replaces"))
print(round((ready - '"$down_at"' - 5) * 1000))')
spec grown 6 0 ", maxUnavailable: \"50%\"" > "$tmp/grown.yaml"
"$cf" deploy -f "$tmp/grown.yaml" --wait > /dev/null
start=$(ms)
"$cf" resize grown worker=$(( 6 + victims )) --wait > /dev/null
grow=$(( $(ms) - start ))
echo "2. h3 killed (worker, agent and scripts) holding $victims of 6 members; --host-timeout ${host_timeout}s"
echo "   until its members show down: ${detect} ms; bound $(( (host_timeout + 2) * 1000 )) ms; ratio $(ratio "$detect" $(( (host_timeout + 2) * 1000 )))"
echo "   replaceAfter expired until replacements ready: ${replaced} ms; resize by $victims: ${grow} ms; ratio $(ratio "$replaced" "$grow") (target 1.5)"
"$cf" delete lossy --wait > /dev/null
"$cf" delete grown --wait > /dev/null
start_host h3
wait_until 60 sh -c "'$cf' hosts | grep -q 'h3 .*ready'"

# 3. A drain of 20 members, against reporting the same 20 gone.
spec gone 60 0 ", maxUnavailable: \"50%\"" > "$tmp/gone.yaml"
"$cf" deploy -f "$tmp/gone.yaml" --wait > /dev/null
members=$(on_host gone h2)
start=$(ms)
for m in $members; do "$cf" signal gone "$m" gone > /dev/null; done
"$cf" status gone --wait --timeout 300s > /dev/null
gone=$(( $(ms) - start ))
"$cf" delete gone --wait > /dev/null
spec drained 60 0 ", maxUnavailable: \"50%\"" > "$tmp/drained.yaml"
"$cf" deploy -f "$tmp/drained.yaml" --wait > /dev/null
drained_members=$(on_host drained h1 | wc -w)
start=$(ms)
"$cf" host drain h1 --wait --timeout 300s > /dev/null
"$cf" status drained --wait --timeout 300s > /dev/null
drain=$(( $(ms) - start ))
echo "3. 60 members, 20 per host"
echo "   drain of h1 ($drained_members members) until drained and ready: ${drain} ms"
echo "   the $(echo "$members" | wc -w) members of h2 reported gone, until ready: ${gone} ms; ratio $(ratio "$drain" "$gone")"
"$cf" host uncordon h1 > /dev/null

# 4. A host lost mid-deploy: a 3-level cluster (1 -> 6 -> 2, configure 3 s) over the three
#    hosts, a random host killed (worker, agent, scripts) 1-9 s in, timed from the kill to
#    the cluster ready without it; against the same deploy on two hosts from the start.
levels3() { # levels3 NAME: the 3-level spec
  cat <<YAML
name: $1
roles:
  - {name: controller, cardinality: "1", startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "3"}, replaceAfter: 5s}
  - {name: worker, members: 6, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "3"}, replaceAfter: 5s, placement: {maxPerHost: 3}}
  - {name: edge, members: 2, dependsOn: [worker], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "3"}, replaceAfter: 5s, placement: {maxPerHost: 1}}
YAML
}
ready_without() { # ready_without NAME HOST
  "$cf" status "$1" -o json | python3 -c "
import json, sys
s = json.load(sys.stdin)
ms = [m for r in s['roles'] for m in r['members']]
sys.exit(0 if s['phase'] == 'ready' and len(ms) == 9 and all(m['state'] == 'ready' and m.get('host') != '$2' for m in ms) else 1)"
}
"$cf" host cordon h3 > /dev/null
levels3 twohosts > "$tmp/twohosts.yaml"
start=$(ms)
"$cf" deploy -f "$tmp/twohosts.yaml" --wait > /dev/null
twohosts=$(( $(ms) - start ))
"$cf" delete twohosts --wait > /dev/null
"$cf" host uncordon h3 > /dev/null
: > "$tmp/loss"
for i in $(seq "${TRIALS:-10}"); do
  dead=h$(( RANDOM % 3 + 1 ))
  levels3 "loss-$i" > "$tmp/loss-$i.yaml"
  "$cf" deploy -f "$tmp/loss-$i.yaml" > /dev/null
  sleep "$(python3 -c 'import random; print(round(random.uniform(1, 9), 2))')"
  start=$(ms)
  kill -9 "${host_pid[$dead]}"
  [ -f "$tmp/data-$dead/agent/agent.pid" ] && kill -9 "$(cat "$tmp/data-$dead/agent/agent.pid")" 2>/dev/null || true
  pkill -9 -f "$tmp/data-$dead/clusters" 2>/dev/null || true
  wait_until 300 ready_without "loss-$i" "$dead"
  echo $(( $(ms) - start )) >> "$tmp/loss"
  "$cf" delete "loss-$i" --wait > /dev/null
  start_host "$dead"
  wait_until 60 sh -c "'$cf' hosts | grep -q '$dead .*ready'"
done
echo "4. a host killed at a random moment of a 3-level deploy (1 -> 6 -> 2, 3 s configures), ${TRIALS:-10} trials; --host-timeout ${host_timeout}s, replaceAfter 5s"
echo "   kill until ready without it: median $(median < "$tmp/loss") ms ($(tr '\n' ' ' < "$tmp/loss")ms)"
echo "   the same deploy on two hosts from the start: ${twohosts} ms; ratio $(ratio "$(median < "$tmp/loss")" "$twohosts")"

# 5. The window in which a lost host is taken for lost: its worker killed at a random moment
#    of its lease's beat (every tenth of the host timeout), until `hosts` says lost.
: > "$tmp/window"
for i in $(seq "${TRIALS:-10}"); do
  sleep "$(python3 -c "import random; print(round(random.uniform(0, $host_timeout / 10), 3))")"
  start=$(ms)
  kill -9 "${host_pid[h2]}"
  until "$cf" hosts | grep -q 'h2 .*lost'; do sleep 0.05; done
  echo $(( $(ms) - start )) >> "$tmp/window"
  start_host h2
  wait_until 60 sh -c "'$cf' hosts | grep -q 'h2 .*ready'"
done
echo "5. a host's worker killed, until taken for lost; --host-timeout ${host_timeout}s (its last heartbeat is at most $(( host_timeout * 100 )) ms before the kill)"
echo "   earliest $(sort -n "$tmp/window" | head -1) ms, latest $(sort -n "$tmp/window" | tail -1) ms after the kill ($(tr '\n' ' ' < "$tmp/window")ms); documented: between 1 and 1.1 host timeouts after the last heartbeat"
