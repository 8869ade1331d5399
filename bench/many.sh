#!/usr/bin/env bash
# 100 clusters at once on the embedded default: 100 clusters of 10 members in 3 levels
# (1 controller -> 6 workers -> 3 edge), deployed by 100 concurrent `deploy --wait`
# commands. Checks from the scripts' trace that every member was configured exactly once
# and that in every cluster each level started only after the level it depends on ended.
# The baseline, in the same run: one cluster of the same 1,000 members in the same 3
# levels (100 -> 600 -> 300), deployed by one command.
#
#   bench/many.sh          # CLUSTERS=20 bench/many.sh for a quicker run
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clusters=${CLUSTERS:-100}
source "$root/bench/lib.sh"

start_bg dev "^Ready" dev --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn

# spec NAME CONTROLLERS WORKERS EDGES
spec() {
  cat <<YAML
name: $1
roles:
  - {name: controller, members: $2, startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
  - {name: worker, members: $3, dependsOn: [controller], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
  - {name: edge, members: $4, dependsOn: [worker], startscript: $tmp/trace.sh, env: {TRACE: $tmp/$1.trace}}
YAML
}
spec warmup 1 6 3 > "$tmp/warmup.yaml"
"$cf" deploy -f "$tmp/warmup.yaml" --wait > /dev/null

pss_start
spec one 100 600 300 > "$tmp/one.yaml"
start=$(ms)
"$cf" deploy -f "$tmp/one.yaml" --wait --timeout 30m > "$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; exit 1; }
one_ms=$(( $(ms) - start ))

pids=()
start=$(ms)
for i in $(seq "$clusters"); do
  spec "c$i" 1 6 3 > "$tmp/c$i.yaml"
  "$cf" deploy -f "$tmp/c$i.yaml" --wait --timeout 30m > "$tmp/c$i.out" 2>&1 & pids+=($!)
done
failed=()
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("c$((i + 1))"); done
many_ms=$(( $(ms) - start ))
pss_stop
if [ ${#failed[@]} -gt 0 ]; then
  echo "${#failed[@]} of $clusters deploys failed (${failed[*]}); the first said:"
  cat "$tmp/${failed[0]}.out"
  "$cf" status "${failed[0]}" || true
  exit 1
fi

python3 - "$tmp" "$clusters" "$one_ms" "$many_ms" "$(cat "$tmp/rss")" <<'PY'
import sys
tmp, clusters, one_ms, many_ms, rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
levels = ["controller", "worker", "edge"]

def check(name, sizes):
    """Exactly once per member, and each level's first start after the previous level's last end."""
    starts, ends, runs = {}, {}, {}
    for line in open(f"{tmp}/{name}.trace"):
        kind, at, member, event = line.split()
        if event != "configure":
            continue
        role = member.split("-")[1]
        (starts if kind == "start" else ends).setdefault(role, []).append(float(at))
        if kind == "start":
            runs[member] = runs.get(member, 0) + 1
    problems = []
    for role, size in zip(levels, sizes):
        if len(starts.get(role, [])) != size or len(ends.get(role, [])) != size:
            problems.append(f"{role}: {len(starts.get(role, []))} starts, {len(ends.get(role, []))} ends, want {size}")
    twice = [m for m, n in runs.items() if n > 1]
    if twice:
        problems.append(f"configured more than once: {twice[:5]}")
    for before, after in zip(levels, levels[1:]):
        if starts.get(after) and ends.get(before) and min(starts[after]) < max(ends[before]):
            problems.append(f"{after} started before {before} ended")
    return problems

bad = {}
for name, sizes in [("one", (100, 600, 300))] + [(f"c{i}", (1, 6, 3)) for i in range(1, clusters + 1)]:
    p = check(name, sizes)
    if p:
        bad[name] = p
_, pss, *_ = rss.split()
print(f"{clusters} clusters of 10 members (1 -> 6 -> 3), by {clusters} concurrent deploy --wait, on the embedded default")
print(f"  one cluster of 1000 members (100 -> 600 -> 300), one deploy --wait: {one_ms:7d} ms")
print(f"  {clusters} clusters at once, until the last is ready:        {many_ms:7d} ms   ratio {many_ms / one_ms:.2f}x")
print(f"  peak PSS of server, worker and agent:                 {int(pss):7d} MiB")
if bad:
    for name, p in sorted(bad.items())[:10]:
        print(f"  FAILED {name}: {'; '.join(p)}")
    sys.exit(1)
print(f"  every member configured exactly once; dependency order held in all {clusters + 1} clusters")
PY
