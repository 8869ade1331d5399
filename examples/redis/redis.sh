#!/bin/sh
# A Redis Cluster as two clusterflow roles: redis (the servers) and admin (one member that
# shapes the cluster with redis-cli --cluster). Needs redis-server and redis-cli (Debian:
# redis-server, redis-tools).
set -eu
cli() { redis-cli --no-auth-warning "$@"; }

# servers prints "name state address:port" for each redis member in configmeta.
servers() {
  grep -o '{"name":"[^"]*","role":"redis",[^}]*}}' "$CLUSTERFLOW_CONFIGMETA" |
    sed -E 's/^\{"name":"([^"]*)",.*"state":"([a-z_]+)".*"address":"([^"]*)","ports":\{"bus":[0-9]+,"client":([0-9]+)\}\}/\1 \2 \3:\4/'
}
addr() { servers | awk -v n="$1" '$1 == n { print $3 }'; }
on() { local at=$1; shift; cli -h "${at%:*}" -p "${at#*:}" "$@"; } # on ADDRESS:PORT COMMAND...
# entry is a ready server of the cluster, to run redis-cli --cluster through.
entry() {
  local s
  for s in $(servers | awk '$2 == "ready" { print $3 }'); do
    [ "$(on "$s" cluster info 2> /dev/null | tr -d '\r' | grep -c '^cluster_state:ok')" = 1 ] && { echo "$s"; return; }
  done
  echo "no ready server answers with a healthy cluster" >&2
  return 1
}
# settle waits until every node knows every other and all agree on the slots.
settle() {
  local want ok s
  for _ in $(seq 150); do
    want=$(on "$1" cluster nodes | grep -vc fail)
    ok=yes
    for s in $(on "$1" cluster nodes | awk '$3 !~ /fail/ { sub(/@.*/, "", $2); print $2 }'); do
      [ "$(on "$s" cluster nodes | grep -vc fail)" = "$want" ] || ok=
    done
    [ -n "$ok" ] && cli --cluster check "$1" > check.log 2>&1 && ! grep -q '\[ERR\]' check.log && return 0
    sleep 0.2
  done
  cat check.log >&2
  return 1
}
# balance runs a rebalance, fixing and retrying what a busy cluster made it leave half done.
balance() {
  local via=$1
  shift
  for _ in 1 2 3 4 5; do
    settle "$via"
    cli --cluster rebalance "$via" "$@" > rebalance.log 2>&1 && ! grep -q '\*\*\*' rebalance.log && return 0
    cli --cluster fix "$via" --cluster-yes > fix.log 2>&1 || true
  done
  cat rebalance.log >&2
  return 1
}
id() { on "$1" cluster myid | tr -d '\r'; }
nodes() { tr '\n' ' ' < "$CLUSTERFLOW_NODES_FILE"; } # the nodes an addnodes, removing or delnodes names
known() { on "$1" cluster nodes | grep -q "^$(id "$2") "; } # known ENTRY NODE

case "$CLUSTERFLOW_ROLE/$1" in
redis/--configure)
  me=$(addr "$CLUSTERFLOW_MEMBER")
  if ! [ -f redis.pid ] || ! kill -0 "$(cat redis.pid)" 2> /dev/null; then
    redis-server --bind "$CLUSTERFLOW_ADDRESS" --port "$CLUSTERFLOW_PORT_CLIENT" --cluster-port "$CLUSTERFLOW_PORT_BUS" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --cluster-allow-replica-migration no --dir . --appendonly yes --save "" \
      --daemonize no --logfile redis.log < /dev/null > /dev/null 2>&1 &
    echo $! > redis.pid
  fi
  for _ in $(seq 100); do on "$me" ping > /dev/null 2>&1 && break; sleep 0.1; done
  on "$me" ping > /dev/null
  if [ -n "${CLUSTERFLOW_REPLACES:-}" ]; then # every survivor forgets the member it replaces
    gone=$(addr "$CLUSTERFLOW_REPLACES")
    for a in $(servers | awk -v m="$CLUSTERFLOW_MEMBER" -v r="$CLUSTERFLOW_REPLACES" '$1 != m && $1 != r && $2 == "ready" { print $3 }'); do
      for n in $(on "$a" cluster nodes | awk -v g="$gone@" 'index($2, g) == 1 { print $1 }'); do on "$a" cluster forget "$n" > /dev/null; done
    done
  fi
  ;; # the admin brings a joining server into the cluster (addnodes)
redis/--teardown)
  if [ -f redis.pid ]; then kill "$(cat redis.pid)" 2> /dev/null || true; fi
  rm -f redis.pid nodes.conf && rm -rf appendonlydir
  ;;
admin/--configure) # the first admin creates the cluster; a later one finds it made
  if ! e=$(entry 2> /dev/null); then
    cli --cluster create $(servers | awk '$2 == "ready" { print $3 }') --cluster-replicas 1 --cluster-yes > create.log
    e=$(entry)
  fi
  settle "$e"
  ;;
admin/--addnodes) # joiners: each a replica of a master that has none, else a master
  e=$(entry)
  for n in $(nodes); do
    a=$(addr "$n")
    known "$e" "$a" && continue
    settle "$e"
    lonely=$(on "$e" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { m[$1] = 1 } $3 ~ /slave/ { r[$4] = 1 } END { for (i in m) if (!r[i]) print i }' | head -n 1)
    if [ -n "$lonely" ]; then
      cli --cluster add-node "$a" "$e" --cluster-slave --cluster-master-id "$lonely" > add.log
    else
      cli --cluster add-node "$a" "$e" > add.log
    fi
  done
  balance "$e" --cluster-use-empty-masters
  ;;
admin/--removing) # leavers: move their slots to the others, then take them out
  e=$(entry)
  weights=""
  for n in $(nodes); do weights="$weights $(id "$(addr "$n")")=0"; done
  balance "$e" --cluster-weight $weights
  for n in $(nodes); do
    a=$(addr "$n")
    known "$e" "$a" && cli --cluster del-node "$e" "$(id "$a")" > del.log
  done
  settle "$e"
  ;;
admin/--delnodes) # whatever left without a word (a killed server) is forgotten everywhere
  e=$(entry)
  for n in $(on "$e" cluster nodes | awk '$3 ~ /fail/ && $3 !~ /myself/ { print $1 }'); do
    for a in $(servers | awk '$2 == "ready" { print $3 }'); do on "$a" cluster forget "$n" > /dev/null 2>&1 || true; done
  done
  ;;
esac
