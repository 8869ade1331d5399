#!/bin/sh
# A Redis Cluster as clusterflow roles: the redis role's members are the servers, and the
# admin member (a role of one, set up after them) builds the cluster and changes it with
# redis-cli --cluster as members come and go. Needs redis-server and redis-cli (Debian:
# redis-server, redis-tools) and jq.
set -eu
meta=$CLUSTERFLOW_CONFIGMETA

# at NAME: a member's HOST:PORT, from configmeta (leaving members are listed until gone).
at() { jq -r --arg n "$1" '.members[] | select(.name == $n) | "\(.address):\(.ports.client)"' "$meta"; }
# ready: every ready server's HOST:PORT, a line each.
ready() { jq -r '.members[] | select(.role == "redis" and .state == "ready") | "\(.address):\(.ports.client)"' "$meta"; }
rcli() { _at=$1; shift; redis-cli -h "${_at%:*}" -p "${_at##*:}" "$@"; }
# seed: a ready server that is in the cluster, to run --cluster commands through.
seed() {
  for a in $(ready); do
    [ "$(rcli "$a" cluster info 2> /dev/null | grep -c '^cluster_known_nodes:[2-9]')" = 1 ] && { echo "$a"; return; }
  done
  return 1
}
# id HOST:PORT: the node's ID as the cluster knows it, or nothing.
id() { rcli "$(seed)" cluster nodes | awk -v a="$1" 'index($2, a "@") == 1 { print $1 }'; }
# logged LOG CMD...: runs CMD with its output in LOG, shown on stderr if it fails.
logged() {
  _log=$1; shift
  "$@" > "$_log" 2>&1 || { tail -n 20 "$_log" >&2; return 1; }
}
# nodes ARGS...: the names an event's --nodes (or --nodes-file) gives, a line each.
nodes() {
  while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) echo "$2" | tr , '\n' ;;
    --nodes-file) cat "$2" ;;
    esac
    shift
  done
}
# settle [any-masters]: wait until every node agrees on slots and, unless told that empty
# masters are expected (a joiner before the rebalance), every live master serves slots: a
# new replica's role has reached the seed.
settle() {
  for _ in $(seq 120); do
    if s=$(seed) && agreed && redis-cli --cluster check "$s" > check.log 2>&1 && ! grep -q '\[ERR\]\|\[WARNING\]' check.log; then
      [ "${1:-}" = any-masters ] && return 0
      rcli "$s" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && $9 == "" { empty = 1 } END { exit empty }' && return 0
    fi
    sleep 0.5
  done
  cat check.log >&2
  return 1
}
# agreed: every server in the cluster is ok and knows as many live nodes as the others (the
# check goes through the seed, which may know of a joiner before the joiner knows of all),
# and every replica has synced with its master: one that has not yet cannot take over when
# its master dies (its data counts as too old), so a master killed just after the deploy
# would stay down. One redis-cli and one awk a server: settle polls this on busy machines.
agreed() {
  views=$(for a in $(ready); do
    printf 'cluster nodes\ncluster info\ninfo replication\n' | rcli "$a" 2> /dev/null | awk '
      { sub(/\r$/, "") }
      /^cluster_state:/ { state = $0 }
      /^role:slave$/ { replica = 1 }
      /^master_link_status:/ { link = $0 }
      NF >= 8 && $3 !~ /fail|handshake|noaddr/ { live++ }
      END { if (live > 1) print live, state (replica && link != "master_link_status:up" ? " syncing" : "") }'
  done | sort -u)
  [ "$(echo "$views" | wc -l)" = 1 ] && [ "${views#* }" = cluster_state:ok ]
}
# failed_over ID: wait until a dead node serves no slots (its replica took them over).
failed_over() {
  for _ in $(seq 120); do
    [ -z "$(rcli "$(seed)" cluster nodes | awk -v i="$1" '$1 == i && $9 != ""')" ] && return 0
    sleep 0.5
  done
  echo "node $1 is gone and no replica took its slots over" >&2
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
cluster-node-timeout 5000
cluster-allow-replica-migration no
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
    # shellcheck disable=SC2046
    logged create.log redis-cli --cluster create $(ready) --cluster-replicas 1 --cluster-yes
    settle
    ;;
  --addnodes) # a joiner replicates a master that has none, or becomes a master with slots
    s=$(seed)
    for n in $(nodes "$@"); do
      a=$(at "$n")
      [ -n "$(id "$a")" ] && continue # added before
      settle any-masters # a failover (the master of a member gone) completes first
      # A master serving slots that no live replica follows.
      lone=$(rcli "$s" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { m[$1] = 1 }
        $3 ~ /slave/ && $3 !~ /fail/ { r[$4] = 1 } END { for (x in m) if (!(x in r)) { print x; exit } }')
      if [ -n "$lone" ]; then
        logged add.log redis-cli --cluster add-node "$a" "$s" --cluster-slave --cluster-master-id "$lone"
      else
        logged add.log redis-cli --cluster add-node "$a" "$s"
      fi
      settle any-masters
    done
    logged rebalance.log redis-cli --cluster rebalance "$s" --cluster-use-empty-masters
    settle
    ;;
  --removing) # move the leavers' slots to the others, then take them out of the cluster
    s=$(seed)
    weights=
    for n in $(nodes "$@"); do # the leaving masters that run
      i=$(id "$(at "$n")")
      [ -n "$i" ] && rcli "$(at "$n")" ping > /dev/null 2>&1 &&
        rcli "$s" cluster nodes | grep -q "^$i [^ ]* [^ ]*master" && weights="$weights $i=0"
    done
    # shellcheck disable=SC2086
    [ -z "$weights" ] || logged rebalance.log redis-cli --cluster rebalance "$s" --cluster-weight $weights
    for n in $(nodes "$@"); do
      i=$(id "$(at "$n")")
      [ -n "$i" ] || continue
      if rcli "$(at "$n")" ping > /dev/null 2>&1; then
        echo "taking $n ($i) out of the cluster" >&2
        logged del.log redis-cli --cluster del-node "$s" "$i"
      fi # one gone is forgotten at delnodes, once its replica has taken over
    done
    settle
    ;;
  --delnodes) # members gone: every node forgets the failed nodes no member is any more
    s=$(seed)
    members=$(jq -r '.members[] | "\(.address):\(.ports.client)@"' "$meta")
    for i in $(rcli "$s" cluster nodes | awk '$3 ~ /fail/ { print $1, $2 }' | while read -r i addr; do
      echo "$members" | grep -qF "${addr%%@*}@" || echo "$i"
    done); do
      echo "forgetting $i, failed and no member any more" >&2
      failed_over "$i"
      for m in $(ready); do
        rcli "$m" cluster forget "$i" 2>&1 | grep -v '^OK$' | sed "s/^/$m: forget: /" >&2 || true
      done
    done
    settle
    ;;
  esac
}

case "$CLUSTERFLOW_ROLE" in
admin) admin "$@" ;;
*) server "$@" ;;
esac
