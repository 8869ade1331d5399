#!/bin/sh
# The example app, one startscript for every role, by $CLUSTERFLOW_ROLE:
# - controller: runs a registry service on its address and its named port, registry (both
#   from configmeta, as CLUSTERFLOW_ADDRESS and CLUSTERFLOW_PORT_REGISTRY), and checks that
#   what answers there is the service it started;
# - worker: registers with the controller's registry over the network, and leaves it on
#   teardown;
# - edge: publishes the workers it can route to, and insists every worker of the cluster is
#   registered first.
# Workers genuinely fail if the controller is not set up first, and edges if any worker has
# not registered: only dependency order makes this cluster come up, on one machine or many.
# It needs a POSIX shell and perl, which every Debian, Ubuntu and macOS system has.
set -eu

# The registry speaks one line a connection: "REGISTER name", "LEAVE name", "LIST", or
# "WHO", which the service answers with its process ID.
REGISTRY='
    use strict; use warnings; use IO::Socket::INET;
    my ($cmd, $addr, $port, @args) = @ARGV;
    if ($cmd eq "serve") {
      my ($dir) = @args;
      my $server = IO::Socket::INET->new(LocalAddr => $addr, LocalPort => $port, Listen => 64, ReuseAddr => 1)
        or die "cannot listen on $addr:$port: $@\n";
      print "registry listening on $addr:$port\n";
      $| = 1;
      while (my $c = $server->accept) {
        my $line = <$c> // ""; $line =~ s/\s+$//;
        my ($verb, $name) = split / /, $line, 2;
        if ($verb eq "REGISTER" && $name =~ /^[a-z0-9-]+$/) { open(my $f, ">", "$dir/$name") or die; close $f; print $c "OK\n" }
        elsif ($verb eq "LEAVE" && $name =~ /^[a-z0-9-]+$/) { unlink "$dir/$name"; print $c "OK\n" }
        elsif ($verb eq "LIST") { opendir(my $d, $dir) or die; print $c "$_\n" for sort grep { !/^\./ } readdir $d; closedir $d }
        elsif ($verb eq "WHO") { print $c "$$\n" }
        else { print $c "ERROR unknown request\n" }
        close $c;
      }
    }
    # A client: one request, its answer on stdout.
    my ($request) = @args;
    my $c = IO::Socket::INET->new(PeerAddr => $addr, PeerPort => $port, Timeout => 3) or die "cannot reach the registry at $addr:$port: $@\n";
    print $c "$request\n";
    print while <$c>;
'
registry() { perl -e "$REGISTRY" "$@"; }

# Each member sits on one line of configmeta, so grep finds it without a JSON parser.
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
# Where the controller's registry answers, "ADDRESS PORT": its address (its host's, or
# loopback in single-host mode) and its port named registry.
controller_endpoint() {
  line=$(grep '"role":"controller"' "$CLUSTERFLOW_CONFIGMETA" | grep '"state":"ready"' | head -n 1)
  [ -n "$line" ] || return 1
  addr=$(echo "$line" | field address)
  port=$(echo "$line" | sed -n 's/.*"registry":\([0-9]*\).*/\1/p')
  [ -n "$port" ] || return 1
  echo "${addr:-127.0.0.1} $port"
}

controller() {
  case "$1" in
    --configure)
      addr=${CLUSTERFLOW_ADDRESS:-127.0.0.1}
      port=$CLUSTERFLOW_PORT_REGISTRY
      mkdir -p registry
      [ ! -s service.pid ] || kill "$(cat service.pid)" 2>/dev/null || true
      nohup sh "$0" --serve "$addr" "$port" > service.log 2>&1 &
      pid=$!
      echo $pid > service.pid
      # Up once the service this configure started answers: another process answering on
      # the port (another cluster's, say) is not this member's service.
      i=0
      until [ "$(registry client "$addr" "$port" WHO 2>/dev/null)" = "$pid" ]; do
        i=$((i + 1))
        if [ "$i" -gt 50 ] || ! kill -0 "$pid" 2>/dev/null; then
          echo "registry service did not start on $addr:$port:" >&2; cat service.log >&2; exit 1
        fi
        sleep 0.1
      done
      echo "registry service running on $addr:$port as pid $pid"
      ;;
    --teardown)
      if [ -s service.pid ]; then
        kill "$(cat service.pid)" 2>/dev/null || true
        echo "registry service stopped"
      fi
      rm -f service.pid
      ;;
  esac
}

worker() {
  case "$1" in
    --configure)
      if ! endpoint=$(controller_endpoint); then
        echo "no ready controller in $CLUSTERFLOW_CONFIGMETA" >&2
        exit 1
      fi
      i=0
      # shellcheck disable=SC2086 # the endpoint is two words: address and port
      until answer=$(registry client $endpoint "REGISTER $CLUSTERFLOW_MEMBER" 2>&1) && [ "$answer" = OK ]; do
        i=$((i + 1))
        [ "$i" -le $((${REGISTER_TIMEOUT:-10} * 10)) ] || { echo "the registry at $endpoint did not take the registration: $answer" >&2; exit 1; }
        sleep 0.1
      done
      echo "$endpoint" > controller
      # shellcheck disable=SC2086
      echo "registered with the registry at $(printf '%s:%s' $endpoint)"
      ;;
    --teardown)
      # shellcheck disable=SC2046 # the file holds two words: address and port
      if [ -s controller ] && registry client $(cat controller) "LEAVE $CLUSTERFLOW_MEMBER" > /dev/null 2>&1; then
        echo "deregistered"
      fi
      ;;
  esac
}

edge() {
  case "$1" in
    --configure)
      endpoint=$(controller_endpoint) || { echo "no ready controller in $CLUSTERFLOW_CONFIGMETA" >&2; exit 1; }
      # shellcheck disable=SC2086 # the endpoint is two words: address and port
      registered=$(registry client $endpoint LIST) || { echo "cannot list the registry at $endpoint" >&2; exit 1; }
      : > routes
      for w in $(grep '"role":"worker"' "$CLUSTERFLOW_CONFIGMETA" | field name); do
        if ! echo "$registered" | grep -qx "$w"; then
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
  esac
}

case "${1:-}" in
  --serve)
    # The controller's service, started in the background by its configure.
    exec perl -e "$REGISTRY" serve "$2" "$3" registry
    ;;
  --addnodes|--delnodes)
    echo "membership changed: $*"
    ;;
  --configure|--teardown)
    case "$CLUSTERFLOW_ROLE" in
      controller) controller "$1" ;;
      worker) worker "$1" ;;
      edge) edge "$1" ;;
      *) echo "unknown role $CLUSTERFLOW_ROLE" >&2; exit 2 ;;
    esac
    ;;
  *)
    echo "unknown event: $*" >&2
    exit 2
    ;;
esac
