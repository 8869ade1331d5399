#!/bin/sh
# etcd as a clusterflow role. Needs etcd and etcdctl (Debian: etcd-server, etcd-client).
set -eu
# A busy host, or a cluster electing a leader while members leave, answers slowly.
export ETCDCTL_API=3 ETCDCTL_COMMAND_TIMEOUT=15s
me=$CLUSTERFLOW_MEMBER

# members prints "name ordinal state client-url peer-url" for each member of the role.
members() {
  grep -o "{\"name\":\"[^\"]*\",\"role\":\"$CLUSTERFLOW_ROLE\",[^}]*}}" "$CLUSTERFLOW_CONFIGMETA" |
    sed -E 's/^\{"name":"([^"]*)",.*"ordinal":([0-9]+),"state":"([a-z_]+)".*"address":"([^"]*)","ports":\{"client":([0-9]+),"peer":([0-9]+)\}\}/\1 \2 \3 http:\/\/\4:\5 http:\/\/\4:\6/'
}
ordinal=${me##*-}
client=$(members | awk -v m="$me" '$1 == m { print $4 }')
peer=$(members | awk -v m="$me" '$1 == m { print $5 }')
# peers: the client URLs of the role's other ready members (not those leaving).
peers() { members | awk -v m="$me" '$1 != m && $3 == "ready" { print $4 }' | paste -sd, -; }
# Where etcd listens: the member's address, or, where that is a name (a container per
# member, whose name the engine's DNS answers), every address of the member's container,
# which only its cluster's network reaches.
listen() { case "$1" in http://[0-9]*) echo "$1" ;; *) echo "$1" | sed -E 's#//[^:]+:#//0.0.0.0:#' ;; esac; }
running() { [ -f etcd.pid ] && kill -0 "$(cat etcd.pid)" 2> /dev/null; }
# A member removed from etcd's membership shuts itself down: it may be gone by the kill.
stop() { if running; then kill "$(cat etcd.pid)" 2> /dev/null || true; while running; do sleep 0.1; done; fi; rm -f etcd.pid; }
healthy() { etcdctl --endpoints "$client" endpoint health > /dev/null 2>&1; }

start() { # start INITIAL_CLUSTER new|existing, then wait until the member answers
  if ! running; then
    etcd --name "$me" --data-dir data --initial-cluster-token "$CLUSTERFLOW_CLUSTER" \
      --listen-client-urls "$(listen "$client")" --advertise-client-urls "$client" \
      --listen-peer-urls "$(listen "$peer")" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$1" --initial-cluster-state "$2" > etcd.log 2>&1 < /dev/null &
    echo $! > etcd.pid
  fi
  for _ in $(seq 600); do
    healthy && return 0
    running || break
    sleep 0.1
  done
  echo "etcd $me did not become healthy" >&2
  tail -n 20 etcd.log >&2
  exit 1
}

case "$1" in
--configure)
  if [ -d data/member ]; then # configured before (a retried or restarted configure)
    start "" existing
  elif [ "${CLUSTERFLOW_JOINING:-}" = 1 ]; then
    endpoints=$(peers)
    if [ -n "${CLUSTERFLOW_REPLACES:-}" ]; then # its predecessor leaves etcd first
      for _ in $(seq 30); do
        list=$(etcdctl --endpoints "$endpoints" member list) || { sleep 1; continue; }
        gone=$(echo "$list" | awk -F', ' -v n="$CLUSTERFLOW_REPLACES" '$3 == n { print $1 }')
        [ -z "$gone" ] && break
        etcdctl --endpoints "$endpoints" member remove "$gone" 2> remove.err || sleep 1
      done
    fi
    # One join at a time, in ordinal order: etcd must know every member a joiner starts
    # with, so each waits for the members joining with it before it to have started.
    for n in $(members | awk -v o="$ordinal" '$2 < o && ($3 == "pending" || $3 == "creating" || $3 == "configuring") { print $1 }'); do
      for _ in $(seq 600); do
        etcdctl --endpoints "$endpoints" member list | grep -q ", started, $n, " && break
        sleep 0.1
      done
    done
    # etcd refuses a new member for a few seconds after a membership change, or while a
    # member (re)connects: try until it took.
    for _ in $(seq 60); do
      etcdctl --endpoints "$endpoints" member list | grep -q ", $peer," && break
      etcdctl --endpoints "$endpoints" member add "$me" --peer-urls "$peer" > /dev/null 2> add.err && break
      sleep 0.5
    done
    etcdctl --endpoints "$endpoints" member list | grep -q ", $peer," || { cat add.err >&2; exit 1; }
    initial=$(etcdctl --endpoints "$endpoints" member list |
      awk -F', ' -v m="$me" -v p="$peer" '{ n = $3; if ($4 == p) n = m; if (n != "") print n "=" $4 }' | paste -sd, -)
    start "$initial" existing
  else
    initial=$(members | awk '{ print $1 "=" $5 }' | paste -sd, -)
    start "$initial" new
  fi
  ;;
--decommission) # leaving while the others run: leave etcd's membership first
  endpoints=$(peers)
  # Members leaving together change etcd's membership one at a time: try until it took.
  left=
  for _ in $(seq 30); do
    if list=$(etcdctl --endpoints "$endpoints" member list); then
      id=$(echo "$list" | awk -F', ' -v n="$me" '$3 == n { print $1 }')
      [ -n "$id" ] || { left=yes; break; }
      etcdctl --endpoints "$endpoints" member remove "$id" || true
    fi
    sleep 1
  done
  [ -n "$left" ] || { echo "$me could not leave etcd's membership" >&2; exit 1; }
  stop
  ;;
--teardown)
  stop
  rm -rf data
  ;;
esac
