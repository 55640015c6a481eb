#!/usr/bin/env bash
# Run a full experiment (benchmarks x systems x tasks x repeated runs), then summarize it.
#
# Environment (all optional):
#   TASK_LIMIT      tasks per benchmark                       (default 10)
#   RUNS_PER_TASK   repeated runs per task and system         (default 3)
#   BENCHMARKS      comma-separated benchmarks                (default: all, from `main.py list-benchmarks`)
#   SYSTEMS         comma-separated systems                   (default: all registered systems)
#   MODEL           route for every role (scripted, embedded, or a [models.NAME] route; default: the config's)
#   EXPERIMENT_ID   experiment directory name                 (default: a UTC timestamp)
#   OUTPUT_ROOT     artifact root                             (default artifacts/full_experiment)
#   CONFIG          experiment TOML                           (default: built-in defaults)
#   CONCURRENCY     runs at once                              (default: the config's, 4)
#   EXECUTOR        local | dask                              (default local)
#   SCHEDULER_ADDRESS  dask scheduler, e.g. tcp://host:8786   (default: an in-process LocalCluster)
#   PYTHON          interpreter                               (default python3)
#
# Flags: --list-benchmarks, --benchmark X (repeatable), --benchmarks a,b (flags override BENCHMARKS), -h/--help.
#
# Output: OUTPUT_ROOT/<experiment-id>/<benchmark>/<system>/<task_id>/run_<r>.*, a manifest.json at the
# experiment root, then experiment_summary.csv and the other summaries from `summarize-experiment`.
# Resume: run again with the same EXPERIMENT_ID; finished runs are kept as they are.
# Stop: SIGTERM or Ctrl-C stops cleanly (exit 128+signal); unknown benchmarks or missing API keys
# fail (exit 2) before any run starts.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
PY="${PYTHON:-python3}"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "full_experiment.sh: $*" >&2; exit 2; }

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

if ((${#bench_flags[@]})); then
  benchmarks=("${bench_flags[@]}")
elif [[ -n "${BENCHMARKS:-}" ]]; then
  IFS=',' read -r -a benchmarks <<<"$BENCHMARKS"
else
  mapfile -t benchmarks < <("$PY" main.py list-benchmarks)
  ((${#benchmarks[@]})) || die "no benchmark discovered by 'main.py list-benchmarks'"
fi

if [[ -z "${SYSTEMS:-}" ]]; then
  SYSTEMS="$("$PY" -c 'from mas.systems import SYSTEMS; print(",".join(SYSTEMS))')"
fi

TASK_LIMIT="${TASK_LIMIT:-10}"
RUNS_PER_TASK="${RUNS_PER_TASK:-3}"
OUTPUT_ROOT="${OUTPUT_ROOT:-artifacts/full_experiment}"
EXPERIMENT_ID="${EXPERIMENT_ID:-$(date -u +%Y%m%dT%H%M%SZ)}"
[[ "$TASK_LIMIT" =~ ^[0-9]+$ ]] || die "TASK_LIMIT must be a positive integer (got '$TASK_LIMIT')"
[[ "$RUNS_PER_TASK" =~ ^[0-9]+$ ]] || die "RUNS_PER_TASK must be a positive integer (got '$RUNS_PER_TASK')"

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

root="$OUTPUT_ROOT/$EXPERIMENT_ID"
echo "full_experiment: ${benchmarks[*]} x ${SYSTEMS} x ${TASK_LIMIT} tasks x ${RUNS_PER_TASK} runs -> $root" >&2

# `main.py run` validates everything (benchmarks, systems, API keys) before the first run. It runs in the
# background so a SIGTERM/SIGINT sent to this script is forwarded to it (bash would otherwise wait for
# the child before handling the signal); it then stops cleanly and we exit with its status.
child=""
forward() { [[ -n "$child" ]] && kill -"$1" "$child" 2>/dev/null || true; }
trap 'forward TERM' TERM
trap 'forward INT' INT
"$PY" main.py "${args[@]}" &
child=$!
status=0
wait "$child" || status=$?
# `wait` returns >128 when a trapped signal interrupts it; keep waiting until the child has exited.
while ((status > 128)) && kill -0 "$child" 2>/dev/null; do
  status=0
  wait "$child" || status=$?
done
trap - TERM INT
if ((status > 128)); then
  echo "full_experiment: stopped (exit $status); rerun with EXPERIMENT_ID=$EXPERIMENT_ID to finish the rest" >&2
  exit "$status"
elif ((status != 0)); then
  echo "full_experiment: failed (exit $status)" >&2
  exit "$status"
fi

"$PY" main.py summarize-experiment --experiment-root "$root"
echo "full_experiment: done; summary at $root/experiment_summary.csv" >&2
