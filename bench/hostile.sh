#!/usr/bin/env bash
# What a host refuses: the hostile-member e2e tests, as root, with one user for all
# clusters (--script-user), with a user per cluster (the default), and in the host as it is
# shipped (the systemd units, and the image's entrypoint), each counting the hostile
# actions its members tried, how many the host refused and how many leaked (which must be
# 0; the tests fail otherwise); then the control endpoints a member tries on dev and on the
# compose stack.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root, to run scripts as other users" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in TestAScriptUserKeepsAMemberFromTheHost TestEachClusterRunsAsAUserOfItsOwn \
  TestTheShippedUnitsKeepMembersFromTheHostAndEachOther TestTheImageKeepsMembersFromTheHostAndEachOther; do
  go test -count=1 -timeout 10m -v -run "^$t\$" ./internal/e2e > "$out" 2>&1 || { tail -50 "$out" >&2; exit 1; }
  printf '%-55s %s\n' "$t" "$(grep -o 'hostile actions[a-z ]*:.*' "$out")"
done
for t in TestAMemberReachesNoControlEndpointOfDev TestAMemberReachesNoControlEndpointOfTheComposeStack; do
  go test -count=1 -timeout 10m -v -run "^$t\$" ./internal/e2e > "$out" 2>&1 || { tail -50 "$out" >&2; exit 1; }
  printf '%-55s %s\n' "$t" "$(grep -o "hostile member's tries.*" "$out")"
done
