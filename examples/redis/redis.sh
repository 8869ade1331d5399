#!/bin/sh
# A Redis Cluster as clusterflow roles: the redis role's members are the servers, and the
# admin member (a role of one, set up after them) builds the cluster and changes it with
# redis-cli --cluster as members come and go. Needs redis-server and redis-cli (Debian:
# redis-server, redis-tools) and jq.
set -eu
meta=$CLUSTERFLOW_CONFIGMETA

# at NAME: a member's HOST:PORT, from configmeta (leaving members are listed until gone).
at() { jq -r --arg n "$1" '.members[] | select(.name == $n) | "\(.address):\(.ports.client)"' "$meta"; }
# servers STATE: the redis role's members in a state (ready, leaving, ...).
servers() { jq -r --arg s "$1" '.members[] | select(.role == "redis" and .state == $s) | .name' "$meta"; }
rcli() { a=$1; shift; redis-cli -h "${a%:*}" -p "${a##*:}" "$@"; }
# seed: a ready server that is in the cluster, to run --cluster commands through.
seed() {
  for n in $(servers ready); do
    a=$(at "$n")
    [ "$(rcli "$a" cluster info 2> /dev/null | grep -c '^cluster_known_nodes:[2-9]')" = 1 ] && { echo "$a"; return; }
  done
  return 1
}
# id HOST:PORT: the node's ID as the cluster knows it, or nothing.
id() { rcli "$(seed)" cluster nodes | awk -v a="$1" 'index($2, a "@") == 1 { print $1 }'; }
# settle: wait until every node agrees on slots and roles.
settle() {
  for _ in $(seq 120); do
    s=$(seed) && redis-cli --cluster check "$s" > check.log 2>&1 && ! grep -q '\[ERR\]\|\[WARNING\]' check.log && return 0
    sleep 0.5
  done
  cat check.log >&2
  return 1
}

server() {
  case "$1" in
  --configure)
    cat > redis.conf <<EOF
bind $CLUSTERFLOW_ADDRESS
port $CLUSTERFLOW_PORT_CLIENT
cluster-port $CLUSTERFLOW_PORT_BUS
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 2000
appendonly yes
dir $CLUSTERFLOW_MEMBER_DIR
daemonize yes
pidfile $CLUSTERFLOW_MEMBER_DIR/redis.pid
logfile $CLUSTERFLOW_MEMBER_DIR/redis.log
protected-mode no
EOF
    rcli "$CLUSTERFLOW_ADDRESS:$CLUSTERFLOW_PORT_CLIENT" ping > /dev/null 2>&1 || redis-server redis.conf
    for _ in $(seq 100); do
      rcli "$CLUSTERFLOW_ADDRESS:$CLUSTERFLOW_PORT_CLIENT" ping > /dev/null 2>&1 && return 0
      sleep 0.1
    done
    tail -n 20 redis.log >&2
    return 1
    ;;
  --teardown)
    [ -f redis.pid ] && kill "$(cat redis.pid)" 2> /dev/null || true
    rm -rf appendonlydir dump.rdb nodes.conf
    ;;
  esac
}

admin() {
  case "$1" in
  --configure) # the first servers make a cluster of masters, each with a replica
    if seed > /dev/null; then settle; return; fi # made before (a retried configure)
    addrs=$(for n in $(servers ready); do at "$n"; done)
    # shellcheck disable=SC2086
    redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes > create.log
    settle
    ;;
  --addnodes) # a joiner replicates a master that has none, or becomes a master with slots
    shift 3 # --role redis --nodes
    s=$(seed)
    for n in $(echo "$1" | tr , ' '); do
      a=$(at "$n")
      [ -n "$(id "$a")" ] && continue # added before
      settle # a failover (the master of a member gone) completes first
      # A master serving slots that no live replica follows.
      lone=$(rcli "$s" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { m[$1] = 1 }
        $3 ~ /slave/ && $3 !~ /fail/ { r[$4] = 1 } END { for (x in m) if (!(x in r)) { print x; exit } }')
      if [ -n "$lone" ]; then
        redis-cli --cluster add-node "$a" "$s" --cluster-slave --cluster-master-id "$lone" > add.log
      else
        redis-cli --cluster add-node "$a" "$s" > add.log
      fi
      settle
    done
    redis-cli --cluster rebalance "$s" --cluster-use-empty-masters > rebalance.log
    settle
    ;;
  --removing) # move the leavers' slots to the others, then take them out of the cluster
    shift 3
    s=$(seed)
    weights=
    for n in $(echo "$1" | tr , ' '); do
      i=$(id "$(at "$n")")
      [ -n "$i" ] && rcli "$(at "$n")" ping > /dev/null 2>&1 && weights="$weights $i=0"
    done
    # shellcheck disable=SC2086
    [ -z "$weights" ] || redis-cli --cluster rebalance "$s" --cluster-weight $weights > rebalance.log
    for n in $(echo "$1" | tr , ' '); do
      i=$(id "$(at "$n")")
      [ -n "$i" ] || continue
      if rcli "$(at "$n")" ping > /dev/null 2>&1; then
        redis-cli --cluster del-node "$s" "$i" > del.log
      else # gone: every node forgets it
        for m in $(servers ready); do rcli "$(at "$m")" cluster forget "$i" > /dev/null 2>&1 || true; done
      fi
    done
    settle
    ;;
  esac
}

case "$CLUSTERFLOW_ROLE" in
admin) admin "$@" ;;
*) server "$@" ;;
esac
