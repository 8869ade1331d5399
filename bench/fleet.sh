#!/usr/bin/env bash
# A fleet of N hosts (issue 42), simulated in two processes (`clusterflow simulate`: a
# worker each on its own task queue, with its own registration and lease) against the
# embedded default: 99% of the hosts in one with a host timeout of 5 minutes, 1% in
# another with one of 10 s, whose names sort first so that placement puts members there.
# It registers them all, deploys a cluster of MEMBERS members, one per host, kills the
# 1% at once, and prints the times to all ready, to the loss seen and to the members
# replaced, the registry's and the cluster's largest runs, the registry's most pending
# activities, and the peak memory of the process simulating the 99% and of the server.
#
# SERVER=postgres runs the production path instead: Temporal's own server on PostgreSQL,
# configured as docker-compose.yml configures it (bench/pgserver), with `clusterflow setup`
# and one `clusterflow worker` for the workflows (on 2 cores it registered 2,000 hosts but
# not 5,000, which the embedded default did: bench/RESULTS.md).
#
#   bench/fleet.sh 2000; SERVER=postgres bench/fleet.sh 10000; MEMBERS=100 bench/fleet.sh 5000
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hosts=${1:-2000}
members=${MEMBERS:-200}
source "$root/bench/lib.sh"
doomed=$(( hosts / 100 ))
kept=$(( hosts - doomed ))
# One member a host: the lost hosts' members need as many free hosts among the others.
if [ "$members" -gt "$kept" ]; then
  echo "MEMBERS=$members cannot be replaced on the $kept hosts left after losing $doomed (maxPerHost: 1): give at most $kept" >&2
  exit 2
fi
case ${SERVER:-dev} in
  dev)
    start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn
    server_pid=$last_pid # dev runs clusterflow-dev in its place, which embeds the server
    ;;
  postgres)
    start_pgserver
    export "${pg_env[@]}" # its address and client certificate, for every command below
    server_pid=$pg_server_pid
    "$cf" setup > /dev/null
    (cd "$tmp" && exec "$cf" worker --data "$tmp/data" --log-level warn > "$tmp/worker.log" 2>&1) &
    bg_pids+=("$!")
    ;;
  *) echo "SERVER is dev or postgres, not $SERVER" >&2; exit 2 ;;
esac

# count_hosts STATE [PREFIX] prints how many hosts (whose names start with PREFIX) `hosts`
# lists in that state (0 when it cannot answer in time, as while thousands register).
count_hosts() {
  "$cf" hosts -o json 2>/dev/null | python3 -c "
import json, sys
try: print(sum(1 for h in json.load(sys.stdin) if h['state'] == '$1' and h['name'].startswith('${2:-}')))
except Exception: print(0)" || echo 0
}
wait_for() { # wait_for WHAT LIMIT-S EVERY-S COMMAND...: run COMMAND until it succeeds
  local what=$1 limit=$2 every=$3
  shift 3
  local until=$(( $(date +%s) + limit ))
  until "$@"; do
    [ "$(date +%s)" -lt "$until" ] || { echo "FAIL: $what within ${limit}s" >&2; exit 1; }
    sleep "$every"
  done
}
# cpu_cores PID SECONDS prints the cores PID used over the next SECONDS.
cpu_cores() {
  local before after
  before=$(awk '{print $14 + $15}' "/proc/$1/stat")
  sleep "$2"
  after=$(awk '{print $14 + $15}' "/proc/$1/stat")
  python3 -c "print(f'{($after - $before) / $(getconf CLK_TCK) / $2:.2f}')"
}

start=$(ms)
"$cf" simulate --hosts "$doomed" --prefix sim-0 --host-timeout 10s --data "$tmp/doomed" --log-level warn > "$tmp/doomed.log" 2>&1 &
doomed_pid=$!
bg_pids+=("$doomed_pid")
"$cf" simulate --hosts "$kept" --prefix sim-k --host-timeout 5m --data "$tmp/kept" --log-level warn > "$tmp/kept.log" 2>&1 &
kept_pid=$!
bg_pids+=("$kept_pid")
all_ready() { [ "$(count_hosts ready)" = "$hosts" ]; }
# Listing thousands of hosts is work for the server: every 10 s, not every second.
wait_for "$hosts hosts ready" 1800 10 all_ready
register_ms=$(( $(ms) - start ))
# What an idle fleet costs: its leases' heartbeats and its queues' polls.
sleep 30
cpu_cores "$server_pid" 60 > "$tmp/idle_server" &
sampler=$!
idle_kept=$(cpu_cores "$kept_pid" 60)
wait "$sampler"
idle_server=$(cat "$tmp/idle_server")
echo "$hosts simulated hosts ($doomed lost at once, host timeout 10 s), a cluster of $members members, one per host; server: ${SERVER:-dev}"
printf '  all registered and ready:      %8d ms\n' "$register_ms"
printf '  idle, once ready: the server %s cores, simulating %d hosts %s cores\n' "$idle_server" "$kept" "$idle_kept"

cat > "$tmp/spread.yaml" <<YAML
name: spread
roles:
  - {name: worker, members: $members, maxInFlight: 500, startscript: $tmp/noop.sh, replaceAfter: 1s, placement: {maxPerHost: 1}}
YAML
start=$(ms)
"$cf" deploy -f "$tmp/spread.yaml" --wait --timeout 30m > "$tmp/deploy.out" || { cat "$tmp/deploy.out"; exit 1; }
deploy_ms=$(( $(ms) - start ))
printf '  deploy --wait:                 %8d ms\n' "$deploy_ms"
on_doomed() {
  "$cf" status spread -o json | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(sum(1 for r in s['roles'] for m in r['members'] if m.get('host', '').startswith('sim-0')), s['phase'])"
}
read -r placed _ < <(on_doomed)

start=$(ms)
{ kill -9 "$doomed_pid" && wait "$doomed_pid"; } 2>/dev/null || true
# The killed ones: a server at its limit may take others for lost for a moment too.
all_lost() { [ "$(count_hosts lost sim-0)" = "$doomed" ]; }
wait_for "$doomed hosts lost" 600 1 all_lost
loss_ms=$(( $(ms) - start ))
# A server busy replacing may not answer a status in time: asked again.
replaced() { [ "$(on_doomed 2> /dev/null)" = "0 ready" ]; }
wait_for "the lost hosts' members replaced" 600 1 replaced
replaced_ms=$(( $(ms) - start ))
stats=$(cd "$root" && go run ./bench/registrystats -cluster spread)
peak_mib() { echo $(( $(awk '/VmHWM/ {print $2}' "/proc/$1/status") / 1024 )); }

printf '  loss seen after the kill:      %8d ms   (%d members on the lost hosts)\n' "$loss_ms" "$placed"
printf '  replaced after the kill:       %8d ms\n' "$replaced_ms"
printf '  %s\n' "$stats"
printf '  peak memory, simulating %d hosts: %d MiB; the server (%s): %d MiB\n' "$kept" "$(peak_mib "$kept_pid")" "${SERVER:-dev}" "$(peak_mib "$server_pid")"
