#!/bin/sh
# Edge gateway: publishes the workers it can route to, and insists every worker of the
# cluster is registered with the controller first.
set -eu

case "${1:-}" in
  --configure)
    controller=$(grep '"role":"controller"' "$CLUSTERFLOW_CONFIGMETA" | head -n 1 | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p')
    workers=$(grep '"role":"worker"' "$CLUSTERFLOW_CONFIGMETA" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
    : > routes
    for w in $workers; do
      if [ ! -e "$controller/registry/$w" ]; then
        echo "worker $w is not registered with the controller" >&2
        exit 1
      fi
      echo "$w" >> routes
    done
    echo "routing to $(wc -l < routes) workers"
    ;;
  --teardown)
    rm -f routes
    echo "routes withdrawn"
    ;;
  *)
    echo "unknown event: $*" >&2
    exit 2
    ;;
esac
