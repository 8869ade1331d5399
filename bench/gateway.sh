#!/usr/bin/env bash
# The health gateway's throughput (issue 15): accepted down/up events per second over HTTP
# against the same events through the Go client in one process, and sent as
# `clusterflow signal` (one process per event), on the embedded default, in the same run.
# Target: the gateway within 1.2x of the in-process client, that is bounded by Temporal.
#
#   bench/gateway.sh          # EVENTS=2000 CONCURRENCY=16 SIGNALS=200 bench/gateway.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
events=${EVENTS:-2000}
concurrency=${CONCURRENCY:-16}
signals=${SIGNALS:-200}
members=${MEMBERS:-32}
source "$root/bench/lib.sh"
(cd "$root" && go build -o "$tmp/gatewayload" ./bench/gatewayload)

gw=127.0.0.1:$(free_port)
start_bg dev "^Ready" dev --no-ui --gateway-address "$gw" --rate 100000 --burst 100000 --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn
# Every run gets a fresh cluster: a cluster's history grows with its events, and with it the
# time per event, so runs on one cluster would favour whichever way ran first.
deploy_fresh() {
  cat > "$tmp/$1.yaml" <<YAML
name: $1
roles:
  - {name: worker, members: $members, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}, replaceAfter: 1h, flapLimit: 1000000, maxUnavailable: "100%"}
YAML
  "$cf" deploy -f "$tmp/$1.yaml" --wait > /dev/null
}
load() {
  deploy_fresh "$2"
  case $1 in
    client) "$tmp/gatewayload" -mode client -cluster "$2" -members "$members" -n "$events" -c "$concurrency" ;;
    http) "$tmp/gatewayload" -mode http -url "http://$gw" -token-file "$tmp/gateway-token" -cluster "$2" -members "$members" -n "$events" -c "$concurrency" ;;
  esac
}

echo "$events events over $members members, $concurrency in flight, a fresh cluster per run, on the embedded default"
runs=()
n=0
for way in http client client http http client; do
  n=$((n + 1))
  runs+=("$(load $way "gw-$n")")
  echo "  ${runs[-1]}"
done

# One process per event, as a shell script calling the CLI would: $signals of them.
start=$(ms)
seq 0 $((signals - 1)) | xargs -P "$concurrency" -I{} sh -c \
  'i={}; m=$((i % '"$members"')); e=down; [ $(( (i / '"$members"') % 2 )) -eq 1 ] && e=up; exec "$0" signal gw-1 gw-1-worker-$m $e --source bench > /dev/null' "$cf"
signal_ms=$(( $(ms) - start ))

python3 - "$signal_ms" "$signals" "${runs[@]}" <<'PY'
import re, sys
signal_ms, signals, *runs = sys.argv[1:]
def rate(way):
    rates = sorted(float(re.search(r"(\d+) per second", r).group(1)) for r in runs if r.startswith(way))
    return rates[len(rates) // 2]
c, h = rate("client"), rate("http")
print(f"  signal (a process each): {int(signals)} events, {int(signals) / (int(signal_ms) / 1000):.0f} per second")
print(f"  gateway against the in-process client, medians: {c / h:.2f}x the time per event (target at most 1.2x)")
PY
