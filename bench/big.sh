#!/usr/bin/env bash
# One cluster of 10,000 members on the embedded default, over 4 hosts in one `dev`
# process: one controller and 9,999 workers with a 63-character role name and a 32 KiB env,
# maxInFlight 500, 0 s scripts.
#
# Deploys it, grows the workers by 1,000 and shrinks them back (every member that stays
# runs addnodes, then delnodes, about the 1,000), times `status` and `status -o json`, and
# deletes it. The floor is the same number of the same script run by a shell with the same
# parallelism (xargs -P 500), each in a sandbox folder of its own, measured in the same
# run, in turn with the deploy: PAIRS pairs, on a quiet machine. Then it checks, from the
# scripts' own trace, that every event ran exactly once per member and that every member
# that stayed was told exactly once, and from the server the bounds of every workflow
# (bench/histories: events and bytes of a history, the largest
# event and the largest workflow task). Targets: deploy at most 2x the floor, peak PSS at
# most 1 GiB.
#
#   bench/big.sh          # MEMBERS=2000 PAIRS=3 bench/big.sh for a quicker run; PROFILE=1 to profile;
#                         # ROLE_LEN=40 for member names that clusterflow before 2026-12 took
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
members=${MEMBERS:-10000}
workers=$((members - 1))
change=${CHANGE:-$((members / 10))}
role_len=${ROLE_LEN:-63}
role=w$(printf "%0$((role_len - 1))d" 0 | tr 0 o)   # 63 characters unless ROLE_LEN says
cert=$(head -c 24000 /dev/urandom | base64 -w0 | head -c 32000)
source "$root/bench/lib.sh"
(cd "$root" && go build -o "$tmp/histories" ./bench/histories)

start_bg dev "^Ready" dev --no-ui --no-gateway --hosts 4 --db "$tmp/dev.db" --data "$tmp/data" --address "$TEMPORAL_ADDRESS" --log-level warn
until [ "$("$cf" hosts | grep -c " ready ")" = 4 ]; do sleep 0.2; done

# The script: one line per run, which is all the exactly-once check needs; addnodes and
# delnodes also write how many nodes they were told of.
cat > "$tmp/note.sh" <<'SH'
#!/bin/sh
case "$4" in
--nodes) n=$(printf '%s' "$5" | tr , '\n' | wc -l); n=$((n + 1)) ;;
--nodes-file) n=$(wc -l < "$5") ;;
*) n=- ;;
esac
echo "$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT $n" >> "$TRACE"
SH
chmod +x "$tmp/note.sh"
cat > "$tmp/big.yaml" <<YAML
name: big
roles:
  - name: controller
    cardinality: "1"
    startscript: $tmp/note.sh
    env: {TRACE: $tmp/big.trace}
  - name: $role
    members: $workers
    maxInFlight: 500
    dependsOn: [controller]
    startscript: $tmp/note.sh
    env: {TRACE: $tmp/big.trace, CERT: "$cert"}
YAML

# timed LABEL COMMAND...: runs a clusterflow command, prints and keeps its wall time.
declare -A took
timed() {
  local label=$1 start
  shift
  start=$(ms)
  "$cf" "$@" > "$tmp/$label.out" 2>&1 || { cat "$tmp/$label.out"; exit 1; }
  took[$label]=$(( $(ms) - start ))
}
# phase LABEL: the trace lines of the step just done, checked for runs twice; told[LABEL]
# counts the notifications that named exactly the members changed.
mark=0
phase() {
  local lines
  lines=$(wc -l < "$tmp/big.trace")
  tail -n +$((mark + 1)) "$tmp/big.trace" | head -n $((lines - mark)) > "$tmp/$1.trace"
  cut -d' ' -f1,2 "$tmp/$1.trace" | sort | uniq -d > "$tmp/$1.twice"
  runs[$1]=$((lines - mark))
  twice[$1]=$(wc -l < "$tmp/$1.twice")
  told[$1]=$(grep -c -E " (addnodes|delnodes) $change\$" "$tmp/$1.trace" || true)
  mark=$lines
}
declare -A runs twice told

require_quiet
# The ratio takes PAIRS pairs (default 5) of a floor and then a deploy: the first deploy is
# the whole scenario's, the others deploy clusters of their own and delete them, untimed.
pairs=${PAIRS:-5}
: > "$tmp/floor.ms"; : > "$tmp/deploy.ms"
xargs_floor "$members" "$tmp/note.sh" "$tmp/floor.trace" >> "$tmp/floor.ms"
pss_start
profile_start "${PROFILE_SECONDS:-30}"
timed deploy deploy -f "$tmp/big.yaml" --wait --timeout 60m
echo "${took[deploy]}" >> "$tmp/deploy.ms"
pss_stop
phase deploy
timed grow resize big "$role=$((workers + change))" --wait --timeout 30m
phase grow
timed shrink resize big "$role=$workers" --wait --timeout 30m
phase shrink
timed status status big
timed status_json status big -o json
timed status_members status big --members
json_members=$(python3 -c "import json,sys; print(sum(len(r['members']) for r in json.load(open(sys.argv[1]))['roles']))" "$tmp/status_json.out")
timed delete delete big --wait --timeout 30m
phase delete
"$tmp/histories" > "$tmp/histories.out" && bounds=ok || bounds=EXCEEDED

for i in $(seq 2 "$pairs"); do
  xargs_floor "$members" "$tmp/note.sh" "$tmp/floor.trace" >> "$tmp/floor.ms"
  sed -e "s/^name: big$/name: big-$i/" -e "s|$tmp/big.trace|$tmp/big-$i.trace|" "$tmp/big.yaml" > "$tmp/big-$i.yaml"
  timed "deploy-$i" deploy -f "$tmp/big-$i.yaml" --wait --timeout 60m
  echo "${took[deploy-$i]}" >> "$tmp/deploy.ms"
  configured=$(grep -c " configure " "$tmp/big-$i.trace" || true)
  dup=$(cut -d' ' -f1,2 "$tmp/big-$i.trace" | sort | uniq -d | wc -l)
  [ "$configured" = "$members" ] && [ "$dup" = 0 ] || { echo "FAIL: pair $i configured $configured of $members members, $dup twice" >&2; exit 1; }
  "$cf" delete "big-$i" --wait --timeout 30m > /dev/null
done
floor_ms=$(median < "$tmp/floor.ms")

read -r _ pss _ < "$tmp/rss"
echo "$members members (1 controller, $workers workers of a role named by $role_len characters with a 32 KiB env, maxInFlight 500, 0 s scripts) over 4 hosts, on the embedded default"
printf '  floor, %d scripts by xargs -P 500:    %7d ms median (%s)\n' "$members" "$floor_ms" "$(tr '\n' ' ' < "$tmp/floor.ms")"
printf '  deploy --wait:                       %7d ms median   %s%s\n' "$(median < "$tmp/deploy.ms")" "$(pair_ratios "$tmp/floor.ms" "$tmp/deploy.ms")" "$loaded"
printf '  resize +%d --wait:                 %7d ms\n' "$change" "${took[grow]}"
printf '  resize -%d --wait:                 %7d ms\n' "$change" "${took[shrink]}"
printf '  status / -o json / --members:        %7d / %d / %d ms (json lists %d members)\n' "${took[status]}" "${took[status_json]}" "${took[status_members]}" "$json_members"
printf '  delete --wait:                       %7d ms\n' "${took[delete]}"
printf '  peak PSS during the deploy:          %7d MiB\n' "$pss"
for p in deploy grow shrink delete; do
  printf '  %-7s script runs: %6d, run twice: %d\n' "$p" "${runs[$p]}" "${twice[$p]}"
done
printf '  addnodes naming the %d new:          %6d of %d members that stayed\n' "$change" "${told[grow]}" "$members"
printf '  delnodes naming the %d removed:      %6d of %d members that stayed\n' "$change" "${told[shrink]}" "$members"
echo "  histories: $bounds: $(cat "$tmp/histories.out")"
profile_report
