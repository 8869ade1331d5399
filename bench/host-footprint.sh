#!/usr/bin/env bash
# What a host pays: cmd/clusterflow-host (no embedded server or Web UI) against the full
# cmd/clusterflow-dev (what `clusterflow dev` runs), measured in the same run.
#   - size on disk;
#   - `--help` peak RSS (a client command's start-up). Target: at most 30 MB;
#   - an idle host, worker plus agent, in PSS (/proc/PID/smaps_rollup), after one member
#     ran a script. Target: at most 60 MiB together;
#   - with COLD=1, a cold build (empty build cache, modules downloaded) of each binary, one
#     after the other. Target: the host's at most 1/3 of the full one's.
#
#   bench/host-footprint.sh            COLD=1 bench/host-footprint.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
host_bin=$tmp/clusterflow-host
(cd "$root" && go build -o "$host_bin" ./cmd/clusterflow-host)
start_bg dev "^Ready" dev --no-ui --no-gateway --no-worker --db "$tmp/dev.db" --address "$TEMPORAL_ADDRESS" --log-level warn
"$cf" setup > /dev/null

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
pss_kb() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
help_rss_kb() { /usr/bin/time -f %M "$1" --help 2>&1 >/dev/null | tail -1; }

# idle_host BINARY NAME: starts BINARY as host NAME, runs one member, and prints the PSS in
# KiB of its worker and agent once idle.
idle_host() {
  local bin=$1 name=$2
  (cd "$tmp" && exec "$bin" worker --host "$name" --data "$tmp/data-$name" --log-level warn > "$tmp/$name.log" 2>&1) &
  local pid=$!
  bg_pids+=("$pid")
  until "$cf" hosts | grep -q "^$name .*ready"; do sleep 0.2; done
  cat > "$tmp/$name.yaml" <<YAML
name: $name-app
roles:
  - {name: only, members: 1, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$name.trace}}
YAML
  "$cf" deploy -f "$tmp/$name.yaml" --wait > /dev/null
  sleep 5
  local agent
  agent=$(cat "$tmp/data-$name/agent/agent.pid")
  echo $(( $(pss_kb "$pid") + $(pss_kb "$agent") ))
  "$cf" delete "$name-app" --wait > /dev/null
  "$cf" host cordon "$name" > /dev/null # the next host measured gets the next member
}

full_help=$(help_rss_kb "$cf-dev"); host_help=$(help_rss_kb "$host_bin")
full_idle=$(idle_host "$cf-dev" full)
host_idle=$(idle_host "$host_bin" light)
printf '%-34s %12s %12s %8s\n' "" "clusterflow" "-host" "ratio"
printf '%-34s %9s MB %9s MB %8.2f\n' "size on disk" $(( $(stat -c %s "$cf-dev") / 1000000 )) $(( $(stat -c %s "$host_bin") / 1000000 )) \
  "$(awk -v a="$(stat -c %s "$host_bin")" -v b="$(stat -c %s "$cf-dev")" 'BEGIN { print a / b }')"
printf '%-34s %8s MiB %8s MiB %8.2f   (target: host at most 30 MB)\n' "--help peak RSS" "$(mib "$full_help")" "$(mib "$host_help")" \
  "$(awk -v a="$host_help" -v b="$full_help" 'BEGIN { print a / b }')"
printf '%-34s %8s MiB %8s MiB %8.2f   (target: host at most 60 MiB)\n' "idle host, worker + agent, PSS" "$(mib "$full_idle")" "$(mib "$host_idle")" \
  "$(awk -v a="$host_idle" -v b="$full_idle" 'BEGIN { print a / b }')"

if [ -n "${COLD:-}" ]; then
  cold() {
    local cache
    cache=$(mktemp -d)
    local start
    start=$(ms)
    (cd "$root" && GOCACHE=$cache go build -o "$tmp/cold-$2" "$1")
    echo $(( $(ms) - start ))
    rm -rf "$cache"
  }
  full_cold=$(cold ./cmd/clusterflow-dev full)
  host_cold=$(cold ./cmd/clusterflow-host host)
  printf '%-34s %9d s %10d s %8.2f   (target: at most 0.33)\n' "cold build" $(( full_cold / 1000 )) $(( host_cold / 1000 )) \
    "$(awk -v a="$host_cold" -v b="$full_cold" 'BEGIN { print a / b }')"
fi
