#!/bin/sh
# The image's host, as deploy/systemd runs one on a machine: the agent, which holds the
# members and runs their startscripts as a user per cluster, as root with only the
# capabilities the container is granted (docker-compose.yml: cap_drop ALL, cap_add what the
# agent needs); the worker, which holds the Temporal credentials and the codec keys, as the
# clusterflow user with no capability and no way to gain one. Its arguments are the
# worker's. The agent is started again whenever it exits (its scripts carry on, and it
# adopts them); the host ends with its worker, whose exit status it exits with.
set -eu
bin=${CLUSTERFLOW_BIN:-clusterflow-host}
data=${CLUSTERFLOW_DATA:-/var/lib/clusterflow}
run=${CLUSTERFLOW_RUN:-/run/clusterflow}
secrets=${CLUSTERFLOW_SECRETS:-/etc/clusterflow/secrets}
user=${CLUSTERFLOW_WORKER_USER:-clusterflow}
gid=$(id -g "$user" 2>/dev/null || echo "$user")

# Script users pass through the data folder to their sandboxes; the worker through the
# socket's folder to the socket, which only it and root may use.
mkdir -p "$data" "$run"
# Root's, so that the worker's user cannot move the agent's folder or a sandbox aside.
[ "$(stat -c %u "$data")" = 0 ] || chown 0:0 "$data"
chmod 0711 "$data"
chmod 0755 "$run"
(
  # The worker's environment (its credentials above all) is not the agent's: it gets
  # what it needs of the worker with each call.
  while :; do
    env -i PATH="$PATH" "$bin" agent --data "$data" --secrets-dir "$secrets" --socket "$run/agent.sock" \
      --worker-user "$user" --idle-exit 0 --log-format json || true
    sleep 1
  done
) &
agent=$!
setpriv --reuid "$user" --regid "$gid" --clear-groups --inh-caps -all --ambient-caps -all --no-new-privs \
  "$bin" worker --agent-socket "$run/agent.sock" "$@" &
worker=$!
# A stop (SIGTERM from tini) goes to the worker, which finishes its tasks and exits.
trap 'kill -TERM "$worker" 2>/dev/null || true' TERM INT
while :; do
  wait "$worker" && status=0 || status=$?
  kill -0 "$worker" 2>/dev/null || break
done
kill "$agent" 2>/dev/null || true
exit "$status"
