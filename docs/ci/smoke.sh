#!/usr/bin/env bash
# elastix chaos smoke test for any CI: create a workload, wait until it trains, kill a worker,
# measure the recovery against bounds, keep the evidence, clean up.
#
#   bash docs/ci/smoke.sh all        # every step below, cleanup even on failure
#   bash docs/ci/smoke.sh create|wait|chaos|collect|report|cleanup   # one step (CI with steps)
#
# Settings (environment, all optional):
#   ELASTIX         the elastix command                       [elastix]
#   ELASTIX_TARGET  target flags for every command, e.g. "--backend gke --cluster C --project P
#                   --location L"                             [--backend local]
#   WORKLOAD        workload name (a DNS label)               [elastix-smoke]
#   CREATE_ARGS     workload create flags                     [the local smoke job: 2 slices]
#   KILLS           kills (rounds of faults)                  [1]
#   INTERVAL        time from one kill to the next            [60s]
#   FAULT           kill, term, hang, slice or head           [kill]
#   DURING          aim each at a moment: save, snapshot, restore, recovery, startup or
#                   compile (docs/chaos.md)                   [unset: once training steps]
#   MAX_DOWNTIME    bound per recovery, kill to next step     [2m]
#   MAX_STEPS_LOST  bound per recovery                        [10]
#   MIN_GOODPUT     bound on goodput from the first fault on, e.g. 90%   [unset]
#   TIMEOUT         give up on one recovery after             [5m]
#   WAIT_TIMEOUT    give up waiting for training after        [10m]
#   OUT             folder for the evidence                   [elastix-smoke]
#   PLOTS           1: goodput.png and timeline.png (matplotlib: pip install 'elastix[plot]');
#                   0: leave them out                         [1]
# Evidence in $OUT: chaos.json (the report), junit.xml, summary.md, goodput.png (the chaos
# window, start-up folded at its left), timeline.png (each kill's recovery, phase by phase; a
# missed bound red in both), head.log, status.json, inspect.json (`elastix workload inspect`:
# pods and their events, nodes, Kueue, the measurement; environment values hidden). `report`
# appends summary.md to $GITHUB_STEP_SUMMARY when set (else prints it), or a line saying that
# chaos never reported.
# Exit codes are elastix's (README.md, "Exit codes"): 0 every bound met, 3 a bound missed,
# 4 the workload died, 5 it completed before the last kill, 6 it never trained in time.
set -euo pipefail

elastix=${ELASTIX:-elastix}
workload=${WORKLOAD:-elastix-smoke}
out=${OUT:-elastix-smoke}
# Flags as a shell would split them, quotes kept (a --command "..." is one flag value): they
# come from the CI's own configuration, not from the change under test.
eval "target=(${ELASTIX_TARGET:---backend local})"
eval "create=(${CREATE_ARGS:---tpu-type v5litepod-8 --num-slices 2 --elastic-slices 2 \
  --max-slice-restarts 5 --smoke})"

output() {  # a step output for GitHub Actions; nothing elsewhere
  if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1=$2" >> "$GITHUB_OUTPUT"; fi
}

step_create() {
  mkdir -p "$out"
  rm -f "$out/summary.md" "$out/chaos.exit"  # a report left from another run is not this one's
  "$elastix" workload create "$workload" "${create[@]}" "${target[@]}" --replace
  output workload "$workload"
}

step_wait() {
  # stepping: a step after the first committed snapshot or checkpoint, so the kill below
  # measures a steady-state recovery (never a restore from init)
  "$elastix" workload wait "$workload" --for stepping --timeout "${WAIT_TIMEOUT:-10m}" \
    "${target[@]}"
}

step_chaos() {
  mkdir -p "$out"
  rm -f "$out/summary.md" "$out/chaos.exit"  # --summary appends
  local rc=0
  local aim=()
  if [ -n "${DURING:-}" ]; then aim=(--during "$DURING"); fi
  if [ -n "${MIN_GOODPUT:-}" ]; then aim+=(--min-goodput "$MIN_GOODPUT"); fi
  if [ "${PLOTS:-1}" != 0 ]; then
    aim+=(--plot "$out/goodput.png" --timeline "$out/timeline.png")
  fi
  "$elastix" chaos run "$workload" --kills "${KILLS:-1}" --interval "${INTERVAL:-60s}" \
    --fault "${FAULT:-kill}" "${aim[@]}" --max-downtime "${MAX_DOWNTIME:-2m}" --max-steps-lost "${MAX_STEPS_LOST:-10}" \
    --timeout "${TIMEOUT:-5m}" -o json --junit "$out/junit.xml" --summary "$out/summary.md" \
    "${target[@]}" > "$out/chaos.json" || rc=$?
  echo "$rc" > "$out/chaos.exit"  # it ran: the report step blames it, not a step before it
  output exit_code "$rc"
  return "$rc"
}

step_collect() {  # best effort: the evidence of a failed run matters most
  mkdir -p "$out"
  "$elastix" logs "$workload" "${target[@]}" > "$out/head.log" 2>&1 || true
  "$elastix" workload status "$workload" -o json "${target[@]}" > "$out/status.json" 2>&1 || true
  # everything needed to say why a bound was missed: pods and their events, nodes, Kueue,
  # the measurement so far (environment values hidden)
  "$elastix" workload inspect "$workload" --output-file "$out/inspect.json" "${target[@]}" \
    || true
}

step_report() {  # the Markdown report for the job's page, whatever happened before
  local text
  if [ -f "$out/summary.md" ]; then
    text=$(cat "$out/summary.md")
  elif [ -f "$out/chaos.exit" ]; then
    text="elastix smoke \`$workload\`: no chaos report (\`chaos run\` exited $(cat "$out/chaos.exit") before writing one: its error is in the log)"
  else
    text="elastix smoke \`$workload\`: no chaos report (a step before \`chaos run\` failed)"
  fi
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    printf '%s\n' "$text" >> "$GITHUB_STEP_SUMMARY"
  else
    printf '%s\n' "$text"
  fi
}

step_cleanup() {
  "$elastix" workload delete "$workload" --wait --ignore-not-found --delete-data "${target[@]}"
}

case "${1:-all}" in
  create) step_create ;;
  wait) step_wait ;;
  chaos) step_chaos ;;
  collect) step_collect ;;
  report) step_report ;;
  cleanup) step_cleanup ;;
  all)
    trap 'step_collect; step_report; step_cleanup || true' EXIT
    step_create
    step_wait
    step_chaos
    ;;
  *) echo "usage: $0 [all|create|wait|chaos|collect|report|cleanup]" >&2; exit 2 ;;
esac
