#!/usr/bin/env bash
# Run a full experiment (benchmarks x systems x tasks x repeated runs), then summarize it.
#
# Environment (all optional):
#   TASK_LIMIT      tasks per benchmark                       (default 10)
#   RUNS_PER_TASK   repeated runs per task and system         (default 3)
#   BENCHMARKS      comma-separated benchmarks                (default: every benchmark whose data is installed,
#                                                             from `main.py list-benchmarks --available` with
#                                                             CONFIG's options, so browsecomp is in once CONFIG
#                                                             sets its data_path; the others are named on stderr
#                                                             with the reason)
#   SYSTEMS         comma-separated systems                   (default: all registered systems)
#   MODEL           route for every role (scripted, embedded, or a [models.NAME] route; default: the config's)
#   EXPERIMENT_ID   experiment directory name                 (default: a UTC timestamp)
#   OUTPUT_ROOT     artifact root                             (default artifacts/full_experiment)
#   CONFIG          experiment TOML                           (default: built-in defaults)
#   CONCURRENCY     runs at once                              (default: the config's, 4)
#   EXECUTOR        local | dask                              (default local)
#   SCHEDULER_ADDRESS  dask scheduler, e.g. tcp://host:8786   (default: an in-process LocalCluster)
#   WORKERS         dask without a scheduler: worker processes on this machine (default 1, in-process)
#   ROLLBACK        conformal | top1 | restart | oracle: after the sweep, roll back every failed run once
#                   (`run --rollback`; the summary shows success before and after)   (default: no rollback)
#   CALIBRATION     calibration.json for ROLLBACK=conformal/top1 (default: calibrated on the sweep's own
#                   failed runs, cross-fitted, which needs MODEL=scripted and injected errors)
#   PYTHON          interpreter                               (default python3)
#
# Flags: --list-benchmarks, --benchmark X (repeatable), --benchmarks a,b (flags override BENCHMARKS), -h/--help.
#
# Output: OUTPUT_ROOT/<experiment-id>/<benchmark>/<system>/<task_id>/run_<r>.*, a manifest.json at the
# experiment root, then experiment_summary.csv, the other summaries and the report, written (and the table
# printed) once by `run`.
# Resume: run again with the same EXPERIMENT_ID; finished runs are kept as they are.
# Stop: SIGTERM or Ctrl-C stops cleanly (exit 128+signal); unknown benchmarks or missing API keys
# fail (exit 2) before any run starts; runs that ended in an infrastructure error (model calls that
# failed for good) exit 1 after the summaries, and the same command retries them.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
PY="${PYTHON:-python3}"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "full_experiment.sh: $*" >&2; exit 2; }
# positive_int NAME VALUE: digits only and at least 1 (10# so that "08" is not read as octal).
positive_int() { [[ "$2" =~ ^[0-9]+$ ]] && ((10#$2 >= 1)) || die "$1 must be a positive integer (got '$2')"; }

bench_flags=()
while (($#)); do
  case "$1" in
    --list-benchmarks) exec "$PY" main.py list-benchmarks ;;
    --benchmark) [[ $# -ge 2 && -n "$2" ]] || die "--benchmark needs a name"; bench_flags+=("$2"); shift 2 ;;
    --benchmark=*) bench_flags+=("${1#*=}"); shift ;;
    --benchmarks) [[ $# -ge 2 && -n "$2" ]] || die "--benchmarks needs a comma-separated list"
                  IFS=',' read -r -a _b <<<"$2"; bench_flags+=("${_b[@]}"); shift 2 ;;
    --benchmarks=*) IFS=',' read -r -a _b <<<"${1#*=}"; bench_flags+=("${_b[@]}"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

# Cheap checks first: a bad count fails before any Python starts, let alone a run.
TASK_LIMIT="${TASK_LIMIT:-10}"
RUNS_PER_TASK="${RUNS_PER_TASK:-3}"
positive_int TASK_LIMIT "$TASK_LIMIT"
positive_int RUNS_PER_TASK "$RUNS_PER_TASK"
[[ -z "${CONCURRENCY:-}" ]] || positive_int CONCURRENCY "$CONCURRENCY"
[[ -z "${WORKERS:-}" ]] || positive_int WORKERS "$WORKERS"
TASK_LIMIT=$((10#$TASK_LIMIT)) RUNS_PER_TASK=$((10#$RUNS_PER_TASK))

if ((${#bench_flags[@]})); then
  benchmarks=("${bench_flags[@]}")
elif [[ -n "${BENCHMARKS:-}" ]]; then
  IFS=',' read -r -a benchmarks <<<"$BENCHMARKS"
else
  # Every benchmark whose data is installed; the others are skipped, each named with the reason.
  skipped="$(mktemp)"
  listing=(list-benchmarks --available --names)
  [[ -n "${CONFIG:-}" ]] && listing+=(--config "$CONFIG")
  mapfile -t benchmarks < <("$PY" main.py "${listing[@]}" 2>"$skipped")
  while IFS= read -r line; do
    [[ -n "$line" ]] && echo "full_experiment: ${line/#skipped /skipping } (set BENCHMARKS to choose)" >&2
  done <"$skipped"
  rm -f "$skipped"
  ((${#benchmarks[@]})) || die "no benchmark has its data installed (see 'main.py list-benchmarks --available')"
fi

if [[ -z "${SYSTEMS:-}" ]]; then
  SYSTEMS="$("$PY" -c 'from mas.systems import SYSTEMS; print(",".join(SYSTEMS))')"
fi

OUTPUT_ROOT="${OUTPUT_ROOT:-artifacts/full_experiment}"
EXPERIMENT_ID="${EXPERIMENT_ID:-$(date -u +%Y%m%dT%H%M%SZ)}"

args=(run --task-limit "$TASK_LIMIT" --runs-per-task "$RUNS_PER_TASK" --systems "$SYSTEMS"
      --output-root "$OUTPUT_ROOT" --experiment-id "$EXPERIMENT_ID" --executor "${EXECUTOR:-local}")
for b in "${benchmarks[@]}"; do
  b="${b// /}"
  [[ -n "$b" ]] && args+=(--benchmark "$b")
done
[[ -n "${MODEL:-}" ]] && args+=(--model "$MODEL")
[[ -n "${CONFIG:-}" ]] && args+=(--config "$CONFIG")
[[ -n "${CONCURRENCY:-}" ]] && args+=(--concurrency "$CONCURRENCY")
[[ -n "${SCHEDULER_ADDRESS:-}" ]] && args+=(--scheduler-address "$SCHEDULER_ADDRESS")
[[ -n "${WORKERS:-}" ]] && args+=(--workers "$WORKERS")
[[ -n "${ROLLBACK:-}" ]] && args+=(--rollback "$ROLLBACK")
if [[ -n "${CALIBRATION:-}" ]]; then
  [[ -n "${ROLLBACK:-}" ]] || die "CALIBRATION is used with ROLLBACK=conformal or top1"
  args+=(--calibration "$CALIBRATION")
fi

root="$OUTPUT_ROOT/$EXPERIMENT_ID"
echo "full_experiment: ${benchmarks[*]} x ${SYSTEMS} x ${TASK_LIMIT} tasks x ${RUNS_PER_TASK} runs -> $root" >&2

# `main.py run` validates everything (benchmarks, systems, API keys) before the first run. It runs in the
# background so a SIGTERM/SIGINT sent to this script is forwarded to it (bash would otherwise wait for
# the child before handling the signal); it then stops cleanly and we exit with its status. Bash starts a
# background job of a script with SIGINT ignored: main.py installs its own SIGINT handler first thing, and
# GNU env (coreutils >= 8.31) resets SIGINT for it even before Python starts, so a forwarded Ctrl-C is
# honoured from start-up, validation and embedded server start-up on, not only once runs execute.
launch=()
if env --default-signal=INT true 2>/dev/null; then launch=(env --default-signal=INT); fi
child=""
trapped=0
forward() { trapped=1; [[ -n "$child" ]] && kill -"$1" "$child" 2>/dev/null || true; }

# Sets `status` to the child's own exit status. `wait` answers 128+N both when the child exits that way
# and when a trapped signal interrupts it (the trap runs before the next command, so `trapped` tells);
# then wait again: that answer is the child's own, even when it exited in the meantime (a signal that
# came just after the child exited only repeats it; bash < 5 may answer 127 there, so keep the first).
wait_child() {
  local rc last=""
  while :; do
    trapped=0
    rc=0
    wait "$child" || rc=$?
    if ((rc == 127)) && [[ -n "$last" ]]; then status=$last; return 0; fi
    if ((trapped && rc > 128)); then last=$rc; continue; fi
    status=$rc
    return 0
  done
}

trap 'forward TERM' TERM
trap 'forward INT' INT
${launch[@]+"${launch[@]}"} "$PY" main.py "${args[@]}" &
child=$!
status=0
wait_child
trap - TERM INT
if ((status > 128)); then
  echo "full_experiment: stopped (exit $status); rerun with EXPERIMENT_ID=$EXPERIMENT_ID to finish the rest" >&2
  exit "$status"
elif ((status == 1)); then
  # `run` wrote the summaries; errored runs are no task results and the same command retries them.
  echo "full_experiment: some runs ended in an infrastructure error (see above); rerun with" \
       "EXPERIMENT_ID=$EXPERIMENT_ID to retry them" >&2
  exit 1
elif ((status != 0)); then
  echo "full_experiment: failed (exit $status)" >&2
  exit "$status"
fi

# `run` has written the summaries and the report and printed the table: no second summarize-experiment.
echo "full_experiment: done; summary at $root/experiment_summary.csv, report at $root/report/index.html" >&2
