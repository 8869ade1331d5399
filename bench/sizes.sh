#!/usr/bin/env bash
# The end-to-end size matrix at the sizes its cases were found at: the wide role of 1,500
# members grown by 1,000 and shrunk back, the env at its limit with 500 members, a resize
# from 400 to 1,400 with a long role name, and one from 200 to 500. The suite (make test)
# runs the same cases at the size that proves their class, past the same bounds with fewer
# script runs (internal/e2e/sizes_test.go); this runs them whole, with every assertion:
# each member configured once, each survivor told once of exactly what it did not know,
# every history, event and task within the bounds. It prints each case's steps and time.
#
#   bench/sizes.sh                 # RUN=TestSizesWideRoleInBatches bench/sizes.sh for one case
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=${RUN:-'^(TestSizesWideRoleInBatches|TestSizesEnvAtItsLimit|TestResizeOfALongRoleNameTellsEverySurvivor|TestResizeToFiveHundredDoesNotWedge)$'}
cd "$root"
CLUSTERFLOW_BENCH=1 go test -count=1 -timeout 60m -v -run "$run" ./internal/e2e |
  grep -E '^(=== RUN|--- |ok|FAIL|PASS)|sizes_test.go:[0-9]+: '
