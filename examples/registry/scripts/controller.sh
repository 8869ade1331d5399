#!/bin/sh
# Controller: runs the registry service. Workers register by dropping a file into its
# inbox; the service accepts each registration by moving it into registry/.
set -eu

serve() {
  mkdir -p inbox registry
  echo $$ > service.pid
  while :; do
    for request in inbox/*; do
      [ -e "$request" ] || continue
      name=$(basename "$request")
      case "$name" in
        *.leave) rm -f "registry/${name%.leave}" "$request" ;;
        *) mv "$request" "registry/$name" ;;
      esac
    done
    sleep 0.2
  done
}

case "${1:-}" in
  --serve)
    serve
    ;;
  --configure)
    echo "starting the registry service in $CLUSTERFLOW_MEMBER_DIR"
    rm -f service.pid
    nohup sh "$0" --serve > service.log 2>&1 &
    i=0
    while [ ! -s service.pid ]; do
      i=$((i + 1)); [ "$i" -le 50 ] || { echo "registry service did not start" >&2; exit 1; }
      sleep 0.1
    done
    echo "registry service running as pid $(cat service.pid)"
    ;;
  --addnodes|--delnodes)
    echo "membership changed: $*"
    ;;
  --teardown)
    if [ -s service.pid ]; then
      kill "$(cat service.pid)" 2>/dev/null || true
      echo "registry service stopped"
    fi
    rm -f service.pid
    ;;
  *)
    echo "unknown event: $*" >&2
    exit 2
    ;;
esac
