#!/usr/bin/env bash
# The encrypting codec's cost (issue 26): the same deploys with every payload encrypted
# (--codec-key-file) and without, in one run, on two embedded servers side by side, taken
# in turns so that neither gets the quieter machine. Then the codec server's decode of a
# 100-event history, as the Web UI asks for it. Target: deploys within 1.05x.
#
#   bench/codec.sh            # RUNS=9 MEMBERS=200 SLEEP=3 bench/codec.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-5}
members=${MEMBERS:-200}
sleep_s=${SLEEP:-3}
source "$root/bench/lib.sh"
(cd "$root" && go build -o "$tmp/codecload" ./bench/codecload)

"$cf" codec-key new bench > "$tmp/keys"
chmod 600 "$tmp/keys"
off=127.0.0.1:$(free_port)
on=127.0.0.1:$(free_port)
ui=127.0.0.1:$(free_port)
codec=127.0.0.1:$(free_port)
mkdir -p "$tmp/off" "$tmp/on"
(cd "$tmp/off" && start_bg dev-off "^Ready" dev --no-ui --no-gateway --db "$tmp/off/dev.db" --data "$tmp/off/data" --address "$off" --log-level warn)
(cd "$tmp/on" && start_bg dev-on "^Ready" dev --no-gateway --ui-address "$ui" --codec-address "$codec" --codec-key-file "$tmp/keys" \
  --db "$tmp/on/dev.db" --data "$tmp/on/data" --address "$on" --log-level warn)
# start_bg ran in subshells: find the dev processes to stop them at the end.
for way in off on; do bg_pids+=($(pgrep -f "dev --.*$tmp/$way/dev.db")); done

# cf_at off|on ARGS: the CLI against one server, with its key for the coded one.
cf_at() {
  local way=$1
  shift
  if [ "$way" = on ]; then
    TEMPORAL_ADDRESS=$on CLUSTERFLOW_CODEC_KEY_FILE=$tmp/keys "$cf" "$@"
  else
    TEMPORAL_ADDRESS=$off "$cf" "$@"
  fi
}
workflow_ms() { cf_at "$1" status "$2" -o json | status_ms; }
wide_spec() {
  cat <<YAML
name: $1
roles:
  - {name: worker, members: $2, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace, SLEEP: "$3"}}
YAML
}
for way in off on; do
  levels_spec warmup > "$tmp/warmup.yaml"
  cf_at $way deploy -f "$tmp/warmup.yaml" --wait > /dev/null
done

: > "$tmp/levels-off"; : > "$tmp/levels-on"
for i in $(seq "$runs"); do
  order="off on"; [ $((i % 2)) -eq 0 ] && order="on off"
  for way in $order; do
    levels_spec "levels-$i" > "$tmp/levels-$i.yaml"
    cf_at $way deploy -f "$tmp/levels-$i.yaml" --wait > /dev/null
    workflow_ms $way "levels-$i" >> "$tmp/levels-$way"
  done
done
: > "$tmp/wide-off"; : > "$tmp/wide-on"
for way in off on; do
  wide_spec wide "$members" "$sleep_s" > "$tmp/wide.yaml"
  cf_at $way deploy -f "$tmp/wide.yaml" --wait > /dev/null
  workflow_ms $way wide >> "$tmp/wide-$way"
done

lo=$(median < "$tmp/levels-off"); ln=$(median < "$tmp/levels-on")
wo=$(median < "$tmp/wide-off"); wn=$(median < "$tmp/wide-on")
echo "deploys on the embedded default, workflow clock, codec off against on"
printf '  1 -> 8 -> 2, no-op scripts (median of %d):  off %6d ms   on %6d ms   ratio %.3fx\n' "$runs" "$lo" "$ln" "$(echo "$ln / $lo" | bc -l)"
printf '  %d x %ss:                               off %6d ms   on %6d ms   ratio %.3fx\n' "$members" "$sleep_s" "$wo" "$wn" "$(echo "$wn / $wo" | bc -l)"
echo "the codec server decoding the wide cluster's history, as the Web UI asks for it"
TEMPORAL_ADDRESS=$on "$tmp/codecload" -url "http://$codec" -origin "http://$ui" -workflow wide -events 100 -rounds "${ROUNDS:-20}"
