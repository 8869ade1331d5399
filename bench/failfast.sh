#!/usr/bin/env bash
# Fast failure in a wide role, on the embedded default over 4 hosts: 1 controller and
# MEMBERS-1 workers (maxInFlight 500) whose configure sleeps 1 s, except one worker that
# fails at once. Measures, from the scripts' own trace, how long after the failing script
# ended `deploy --wait` gave up, and how many configures started after it ended (members
# already handed to the agent may still start; no new member should). The baseline is a
# configure's own length, 1 s: the role should stop well within it. Also checks that
# `status` names the failure with its output.
#
#   bench/failfast.sh        # MEMBERS=10000 bench/failfast.sh for the full size
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-2000}
fail_at=$(( members / 5 ))
source "$root/bench/lib.sh"

start_bg dev "^Ready" dev --no-ui --no-gateway --hosts 4 --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn
until [ "$("$cf" hosts | grep -c " ready ")" = 4 ]; do sleep 0.2; done

cat > "$tmp/fail.sh" <<SH
#!/bin/sh
echo "start \$(date +%s.%N) \$CLUSTERFLOW_MEMBER" >> "\$TRACE"
if [ "\$CLUSTERFLOW_MEMBER" = "wide-worker-$fail_at" ]; then
  echo "disk /data is read-only" >&2
  echo "fail \$(date +%s.%N) \$CLUSTERFLOW_MEMBER" >> "\$TRACE"
  exit 3
fi
sleep 1
SH
chmod +x "$tmp/fail.sh"
cat > "$tmp/wide.yaml" <<YAML
name: wide
roles:
  - {name: controller, cardinality: "1", startscript: $tmp/fail.sh, events: [configure], env: {TRACE: $tmp/wide.trace}}
  - {name: worker, members: $((members - 1)), maxInFlight: 500, dependsOn: [controller], startscript: $tmp/fail.sh, events: [configure], env: {TRACE: $tmp/wide.trace}}
YAML

"$cf" deploy -f "$tmp/wide.yaml" --wait --timeout 30m > "$tmp/deploy.out" 2>&1 && { echo "the deploy should have failed"; cat "$tmp/deploy.out"; exit 1; }
gave_up=$(date +%s.%N)
"$cf" status wide > "$tmp/status.out"
grep -q "wide-worker-$fail_at" "$tmp/status.out" && grep -q "read-only" "$tmp/status.out" && named=yes || named=NO

python3 - "$tmp/wide.trace" "$gave_up" "$members" "$named" <<'PY'
import sys
trace, gave_up, members, named = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
starts, failed = [], None
for line in open(trace):
    kind, at, member = line.split()
    if kind == "start":
        starts.append(float(at))
    elif kind == "fail":
        failed = float(at)
after = sum(1 for s in starts if s > failed)
print(f"{members} members (1 controller, {members - 1} workers, maxInFlight 500), configure 1 s, one worker fails at once; 4 hosts")
print(f"  configures started in all:                 {len(starts):6d}")
print(f"  started after the failure ended:           {after:6d}   (up to 500 may already be on their way)")
print(f"  failure ended -> deploy --wait gave up:    {(gave_up - failed) * 1000:6.0f} ms   ({(gave_up - failed):.2f}x a configure's 1 s)")
print(f"  status names the failure and its output:   {named}")
PY
"$cf" delete wide --wait --timeout 30m > /dev/null
