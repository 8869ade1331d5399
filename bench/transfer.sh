#!/usr/bin/env bash
# Moving live clusters from `clusterflow dev` (SQLite) to Temporal on PostgreSQL, as
# docker-compose.yml configures it (bench/pgserver), both on this machine:
#  1. deploy 1 -> 8 -> 2 no-op members with --wait on each server, alternating, before any
#     other load (median of RUNS);
#  2. deploy CLUSTERS clusters of 10 members on dev --hosts 2;
#  3. maintenance on: how long the command takes (it returns once every cluster was told),
#     and until `list` shows every cluster in phase maintenance;
#  4. export --all; import on the PostgreSQL server (in maintenance, host workers over the
#     same sandboxes); maintenance off there until every cluster is ready; retire on dev.
#
#   bench/transfer.sh            # CLUSTERS=100 RUNS=5
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clusters=${CLUSTERS:-100}
runs=${RUNS:-5}
source "$root/bench/lib.sh"
src=$TEMPORAL_ADDRESS
start_bg dev "^Ready" dev --hosts 2 --no-ui --no-gateway --db "$tmp/dev.db" --data "$tmp/data" --address "$src" --log-level warn

start_pgserver
on_dst() { env "${pg_env[@]}" "$cf" "$@"; }
on_dst setup > /dev/null
for h in host-1 host-2; do
  (cd "$tmp" && exec env "${pg_env[@]}" "$cf" worker --host "$h" --host-address 127.0.0.1 --data "$tmp/hosts/$h" --log-level warn > "$tmp/worker-$h.log" 2>&1) &
  bg_pids+=("$!")
done
for _ in $(seq 600); do [ "$(on_dst hosts | grep -c ready)" = 2 ] && break; sleep 0.1; done

levels_spec warm-src > "$tmp/warm-src.yaml"; levels_spec warm-dst > "$tmp/warm-dst.yaml"
"$cf" deploy -f "$tmp/warm-src.yaml" --wait > /dev/null
on_dst deploy -f "$tmp/warm-dst.yaml" --wait > /dev/null
: > "$tmp/levels-src"; : > "$tmp/levels-dst"
for i in $(seq "$runs"); do
  levels_spec "levels-$i" > "$tmp/levels-$i.yaml"
  start=$(ms); "$cf" deploy -f "$tmp/levels-$i.yaml" --wait > /dev/null; echo $(( $(ms) - start )) >> "$tmp/levels-src"
  start=$(ms); on_dst deploy -f "$tmp/levels-$i.yaml" --wait > /dev/null; echo $(( $(ms) - start )) >> "$tmp/levels-dst"
done
"$cf" delete warm-src > /dev/null; on_dst delete warm-dst > /dev/null
for i in $(seq "$runs"); do "$cf" delete "levels-$i" > /dev/null; on_dst delete "levels-$i" > /dev/null; done

echo "deploying $clusters clusters of 10 members on dev..." >&2
for i in $(seq "$clusters"); do
  printf 'name: c%03d\nroles:\n  - {name: worker, members: 10, startscript: %s}\n' "$i" "$tmp/noop.sh" > "$tmp/c$i.yaml"
done
seq "$clusters" | xargs -P 2 -I{} "$cf" deploy -f "$tmp/c{}.yaml" > /dev/null
count_phase() { # src|dst PHASE: how many running clusters list shows in PHASE
  if [ "$1" = dst ]; then on_dst list -o json; else "$cf" list -o json; fi | python3 -c "import json,sys; print(sum(1 for c in json.load(sys.stdin) if c['phase'] == '$2'))"
}
until [ "$(count_phase src ready)" = "$clusters" ]; do sleep 1; done

start=$(ms)
"$cf" maintenance on --reason bench > "$tmp/maintenance-on"
told=$(( $(ms) - start ))
until [ "$(count_phase src maintenance)" = "$clusters" ]; do sleep 0.05; done
shown=$(( $(ms) - start ))

start=$(ms); "$cf" export --all -o "$tmp/clusters.json" 2> /dev/null; export_ms=$(( $(ms) - start ))
on_dst maintenance on --reason adopting > /dev/null
start=$(ms); on_dst import -f "$tmp/clusters.json" > /dev/null; import_ms=$(( $(ms) - start ))
start=$(ms)
on_dst maintenance off > /dev/null
until [ "$(count_phase dst ready)" = "$clusters" ]; do sleep 0.1; done
resumed=$(( $(ms) - start ))
start=$(ms); "$cf" export --retire $(seq -f 'c%03g' "$clusters") > /dev/null; retire_ms=$(( $(ms) - start ))

echo "1 -> 8 -> 2 no-op members, deploy --wait, median of $runs runs each, alternating"
src_ms=$(median < "$tmp/levels-src"); dst_ms=$(median < "$tmp/levels-dst")
printf '  dev (SQLite):              %6d ms\n' "$src_ms"
printf '  Temporal on PostgreSQL:    %6d ms   ratio %.2fx\n' "$dst_ms" "$(echo "$dst_ms / $src_ms" | bc -l)"
echo "moving $clusters clusters of 10 members ($(( clusters * 10 )) members, $(stat -c %s "$tmp/clusters.json") bytes of export)"
printf '  maintenance on returned:   %6d ms   (%s)\n' "$told" "$(tr -d '\n' < "$tmp/maintenance-on")"
printf '  every cluster shown held:  %6d ms   (list, through visibility)\n' "$shown"
printf '  export --all:              %6d ms\n' "$export_ms"
printf '  import:                    %6d ms\n' "$import_ms"
printf '  maintenance off to ready:  %6d ms\n' "$resumed"
printf '  retire on dev:             %6d ms\n' "$retire_ms"
