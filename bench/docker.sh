#!/usr/bin/env bash
# Members as containers: what the docker backend adds to the engine's own cost.
#
# Starts a Docker engine of its own (Debian's docker.io, as root; networks in
# 10.213.192.0/18, images imported from busybox-static, nothing pulled) and, in one run:
#   - deploys N members (100) whose startscript does nothing through `clusterflow dev
#     --backend docker`, each a container from the image, its configure run inside by exec;
#   - runs the same N containers with `docker run` and the same script in each by `docker
#     exec`, from a shell, N at a time (xargs -P N), as the backend makes them all at once.
# Prints both, their ratio (goal: at most 1.5x), and the peak memory of the worker (dev,
# with its Temporal server) and of the agent during the deploy.
#
#   sudo bench/docker.sh            # N=100; N=20 bench/docker.sh for a quick look
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${N:-100}
[ "$(id -u)" -eq 0 ] || { echo "bench/docker.sh starts a Docker engine: run it as root" >&2; exit 1; }
command -v dockerd > /dev/null && command -v docker > /dev/null && command -v busybox > /dev/null ||
  { echo "bench/docker.sh needs Debian's docker.io and busybox-static" >&2; exit 1; }
source "$root/bench/lib.sh"

# The engine, its folder short enough for its sockets.
dk=$(mktemp -d /tmp/cfbk-XXXX)
export DOCKER_HOST=unix://$dk/docker.sock
dockerd --data-root "$dk/data" --exec-root "$dk/exec" --pidfile "$dk/dockerd.pid" -H "$DOCKER_HOST" \
  --bridge none --iptables=false --ip-masq=false --default-address-pool base=10.213.192.0/18,size=24 > "$dk/dockerd.log" 2>&1 &
dockerd_pid=$!
stop_engine() {
  set +e
  docker rm -f $(docker ps -aq) > /dev/null 2>&1
  kill "$dockerd_pid" 2> /dev/null; wait "$dockerd_pid" 2> /dev/null
  grep " $dk/" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2> /dev/null
  rm -rf "$dk"
}
trap 'stop_engine; cleanup' EXIT
for _ in $(seq 300); do docker version > /dev/null 2>&1 && break; sleep 0.1; done

# An image of busybox and the no-op script, which the shell's runs exec.
mkdir -p "$dk/image/bin" "$dk/image/tmp"
cp "$(command -v busybox)" "$dk/image/bin/busybox"
for a in $(busybox --list); do [ "$a" = busybox ] || ln -s busybox "$dk/image/bin/$a"; done
cp "$tmp/noop.sh" "$dk/image/noop.sh"
chmod 1777 "$dk/image/tmp"
tar -C "$dk/image" -c . | docker import -c "ENV PATH=/bin" - clusterflow-bench/noop:1 > /dev/null

start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" \
  --log-level warn --backend docker --docker-host "$DOCKER_HOST"
spec() {
  cat <<YAML
name: $1
roles:
  - {name: member, members: $2, startscript: $tmp/noop.sh, image: "clusterflow-bench/noop:1", timeout: 5m}
YAML
}
# Warm the worker, the agent and the engine up once.
spec warmup 2 > "$tmp/warmup.yaml"
"$cf" deploy -f "$tmp/warmup.yaml" --wait > /dev/null
"$cf" delete warmup --wait > /dev/null

spec bench "$n" > "$tmp/bench.yaml"
pss_start
start=$(ms)
"$cf" deploy -f "$tmp/bench.yaml" --wait --timeout 10m > /dev/null || { "$cf" status bench >&2; exit 1; }
cli=$(( $(ms) - start ))
pss_stop
workflow=$("$cf" status bench -o json | status_ms)
read -r _ _ memory < "$tmp/rss"
# The agent's own peak (VmHWM): it lives as long as the deploy and longer.
agent_peak=$(awk '/^VmHWM/ { print int($2 / 1024) }' "/proc/$(cat "$tmp/data/agent/agent.pid")/status")
start=$(ms)
"$cf" delete bench --wait --timeout 10m > /dev/null
deleted=$(( $(ms) - start ))

docker network create shell-bench > /dev/null
start=$(ms)
seq "$n" | xargs -P "$n" -I{} sh -c 'docker run -d --init --name shell-{} --network shell-bench clusterflow-bench/noop:1 \
  /bin/sh -c "trap \"exit 0\" TERM; while :; do sleep 3600 & wait \$!; done" > /dev/null && docker exec shell-{} /noop.sh --configure'
shell=$(( $(ms) - start ))
start=$(ms)
docker rm -f $(docker ps -aq --filter name=shell-) > /dev/null
docker network rm shell-bench > /dev/null
shell_deleted=$(( $(ms) - start ))

echo "$n members in containers, no-op startscripts, one run each"
printf '  shell (docker run + docker exec, %d at a time): %6d ms\n' "$n" "$shell"
printf '  clusterflow, workflow clock:                    %6d ms   ratio %s (goal at most 1.5x)\n' "$workflow" "$(ratio "$workflow" "$shell")"
printf '  clusterflow deploy --wait:                      %6d ms   (adds CLI start-up and status polling)\n' "$cli"
printf '  delete: clusterflow %d ms, shell (docker rm -f) %d ms\n' "$deleted" "$shell_deleted"
echo "  peak memory during the deploy, MiB RSS: $memory; the agent's peak since its start: $agent_peak"
