#!/bin/sh
# The example app, one startscript for every role, by $CLUSTERFLOW_ROLE:
# - controller: runs a registry service on its host's address (from configmeta), on a port
#   its cluster's name decides;
# - worker: registers with the controller's registry over the network, and leaves it on
#   teardown;
# - edge: publishes the workers it can route to, and insists every worker of the cluster is
#   registered first.
# Workers genuinely fail if the controller is not set up first, and edges if any worker has
# not registered: only dependency order makes this cluster come up, on one machine or many.
# It needs a POSIX shell and perl, which every Debian, Ubuntu and macOS system has.
set -eu

# The registry speaks one line a connection: "REGISTER name", "LEAVE name" or "LIST".
REGISTRY='
    use strict; use warnings; use IO::Socket::INET;
    my ($cmd, @args) = @ARGV;
    # The port comes from the cluster name, so every member finds it without asking.
    my $port = 20000; $port = ($port * 31 + ord($_)) % 20000 for split //, $ENV{CLUSTERFLOW_CLUSTER};
    $port += 20000;
    if ($cmd eq "port") { print "$port\n"; exit 0 }
    if ($cmd eq "serve") {
      my ($addr, $dir) = @args;
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
        else { print $c "ERROR unknown request\n" }
        close $c;
      }
    }
    # A client: one request, its answer on stdout.
    my ($addr, $request) = @args;
    my $c = IO::Socket::INET->new(PeerAddr => $addr, PeerPort => $port, Timeout => 3) or die "cannot reach the registry at $addr:$port: $@\n";
    print $c "$request\n";
    print while <$c>;
'
registry() { perl -e "$REGISTRY" "$@"; }

# Each member sits on one line of configmeta, so grep finds it without a JSON parser.
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
me() { grep "\"name\":\"$CLUSTERFLOW_MEMBER\"" "$CLUSTERFLOW_CONFIGMETA"; }
# The controller's address: its host's, or loopback in single-host mode.
controller_address() {
  line=$(grep '"role":"controller"' "$CLUSTERFLOW_CONFIGMETA" | grep '"state":"ready"' | head -n 1)
  [ -n "$line" ] || return 1
  addr=$(echo "$line" | field address)
  echo "${addr:-127.0.0.1}"
}

controller() {
  case "$1" in
    --configure)
      addr=$(me | field address)
      addr=${addr:-127.0.0.1}
      mkdir -p registry
      [ ! -s service.pid ] || kill "$(cat service.pid)" 2>/dev/null || true
      nohup sh "$0" --serve "$addr" > service.log 2>&1 &
      echo $! > service.pid
      i=0
      until registry client "$addr" LIST > /dev/null 2>&1; do
        i=$((i + 1)); [ "$i" -le 50 ] || { echo "registry service did not start:" >&2; cat service.log >&2; exit 1; }
        sleep 0.1
      done
      echo "registry service running on $addr:$(registry port) as pid $(cat service.pid)"
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
      if ! addr=$(controller_address); then
        echo "no ready controller in $CLUSTERFLOW_CONFIGMETA" >&2
        exit 1
      fi
      i=0
      until answer=$(registry client "$addr" "REGISTER $CLUSTERFLOW_MEMBER" 2>&1) && [ "$answer" = OK ]; do
        i=$((i + 1))
        [ "$i" -le $((${REGISTER_TIMEOUT:-10} * 10)) ] || { echo "the registry at $addr did not take the registration: $answer" >&2; exit 1; }
        sleep 0.1
      done
      echo "$addr" > controller
      echo "registered with the registry at $addr:$(registry port)"
      ;;
    --teardown)
      if [ -s controller ] && registry client "$(cat controller)" "LEAVE $CLUSTERFLOW_MEMBER" > /dev/null 2>&1; then
        echo "deregistered"
      fi
      ;;
  esac
}

edge() {
  case "$1" in
    --configure)
      addr=$(controller_address) || { echo "no ready controller in $CLUSTERFLOW_CONFIGMETA" >&2; exit 1; }
      registered=$(registry client "$addr" LIST) || { echo "cannot list the registry at $addr" >&2; exit 1; }
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
    exec perl -e "$REGISTRY" serve "$2" registry
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
