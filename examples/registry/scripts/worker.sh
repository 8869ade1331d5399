#!/bin/sh
# Worker: finds the controller through configmeta and registers with its registry service.
set -eu

# Each member sits on one line of configmeta, so grep finds it without a JSON parser.
controller_dir() {
  grep '"role":"controller"' "$CLUSTERFLOW_CONFIGMETA" | grep '"state":"ready"' | head -n 1 |
    sed -n 's/.*"dir":"\([^"]*\)".*/\1/p'
}

case "${1:-}" in
  --configure)
    dir=$(controller_dir)
    if [ -z "$dir" ]; then
      echo "no ready controller in $CLUSTERFLOW_CONFIGMETA" >&2
      exit 1
    fi
    if [ ! -s "$dir/service.pid" ] || ! kill -0 "$(cat "$dir/service.pid")" 2>/dev/null; then
      echo "the registry service of $dir is not running" >&2
      exit 1
    fi
    echo "$CLUSTERFLOW_MEMBER" > "$dir/inbox/.$CLUSTERFLOW_MEMBER.tmp"
    mv "$dir/inbox/.$CLUSTERFLOW_MEMBER.tmp" "$dir/inbox/$CLUSTERFLOW_MEMBER"
    i=0
    while [ ! -e "$dir/registry/$CLUSTERFLOW_MEMBER" ]; do
      i=$((i + 1))
      [ "$i" -le $((${REGISTER_TIMEOUT:-10} * 10)) ] || { echo "registration not accepted" >&2; exit 1; }
      sleep 0.1
    done
    echo "$dir" > controller
    echo "registered with the controller at $dir"
    ;;
  --addnodes|--delnodes)
    echo "membership changed: $*"
    ;;
  --teardown)
    if [ -s controller ] && [ -d "$(cat controller)/inbox" ]; then
      touch "$(cat controller)/inbox/$CLUSTERFLOW_MEMBER.leave"
      echo "deregistered"
    fi
    ;;
  *)
    echo "unknown event: $*" >&2
    exit 2
    ;;
esac
