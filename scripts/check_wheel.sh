#!/usr/bin/env bash
# The wheel as a user gets it: build it from the checkout's files, install it into a fresh venv under /tmp (outside
# the checkout; dependencies from the system site-packages, which scripts/install.sh filled), and from a directory
# of its own run `mas-econ --version`, `init-config`, a scripted sweep and `attribute --method chief` on it, then
# install examples/plugin beside it and sweep its benchmark and topology on its provider.
# Exit 0 when everything holds; the failing step's output otherwise. ~1-2 min on 2 cores.
#
#   bash scripts/check_wheel.sh            (keeps nothing; KEEP=1 keeps the temporary directory and prints it)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
tmp="$(mktemp -d /tmp/mas-econ-wheel.XXXXXX)"
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
step() { echo "check_wheel: $*"; }
fail() { echo "check_wheel: FAILED: $*" >&2; exit 1; }

# Build from a copy of the tracked and untracked-but-not-ignored files: an in-tree build/ could carry stale modules.
step "building the wheel"
mkdir -p "$tmp/src" "$tmp/dist" "$tmp/work"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c --no-recursion -f -) \
  | tar -x -C "$tmp/src"
"$python" -m pip wheel --no-deps --no-build-isolation -q -w "$tmp/dist" "$tmp/src" >"$tmp/build.log" 2>&1 \
  || { cat "$tmp/build.log" >&2; fail "pip wheel"; }
wheel="$(ls "$tmp"/dist/mas_econ-*.whl)"
listing="$("$python" -m zipfile -l "$wheel")"
for f in attribution/methods/chief/exemplars.json mas/data/experiment.example.toml descriptor/report/templates/index.html.j2 \
         benchmark/sandbox/child.py benchmark/sandbox/remote_child.py \
         benchmark/workbench/data/emails.csv mas/py.typed descriptor/py.typed benchmark/py.typed attribution/py.typed \
         mas_econ/py.typed mas_econ/cli.py; do
  grep -q "^$f " <<<"$listing" || fail "the wheel lacks $f"
done
if grep -qE "^main\.py " <<<"$listing"; then fail "the wheel installs a top-level main.py"; fi

step "installing it into a venv under $tmp"
"$python" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; fail "pip install"; }
bin="$tmp/venv/bin"

# Everything below runs in $tmp/work with no PYTHONPATH: the checkout is not importable from there.
cd "$tmp/work"
run() { env -u PYTHONPATH "$@"; }
where="$(run "$bin/python" -c 'import mas, attribution, mas_econ; print(mas.__file__); print(attribution.__file__); print(mas_econ.__file__)')"
case "$where" in *"$tmp/venv/"*) ;; *) fail "import mas did not load the installed wheel: $where" ;; esac

step "mas-econ --version"
version="$(run "$bin/mas-econ" --version)"
echo "  $version"
grep -q "^mas-econ 0\.\|^mas-econ [0-9]" <<<"$version" || fail "--version printed: $version"
grep -q "git commit unknown: not installed from a git checkout" <<<"$version" || fail "--version gives no reason: $version"

step "mas-econ init-config"
run "$bin/mas-econ" init-config exp.toml >/dev/null
cmp -s exp.toml "$repo/config/experiment.example.toml" || fail "init-config wrote something else than the example"
if run "$bin/mas-econ" init-config exp.toml 2>"$tmp/err"; then fail "init-config overwrote exp.toml"; fi
grep -q "not overwritten" "$tmp/err" || fail "init-config refused without saying why: $(cat "$tmp/err")"

step "mas-econ run (scripted sweep)"
run "$bin/mas-econ" run --config exp.toml --benchmark arith --model scripted --systems sas,debate --task-limit 2 \
  --runs-per-task 1 --seed 3 --inject-errors 1.0 --output-root out --experiment-id w --progress none >"$tmp/run.log" 2>&1 \
  || { cat "$tmp/run.log" >&2; fail "mas-econ run"; }
[ -f out/w/experiment_summary.json ] || fail "the sweep wrote no experiment_summary.json"
[ -f out/w/report/index.html ] || fail "the sweep wrote no report"
meta="$(find out/w -name 'run_0.metadata.json' | head -1)"
run "$bin/python" - "$meta" <<'EOF' || fail "run metadata: git_commit without a reason"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["git_commit"] is None and "not installed from a git checkout" in m["git_commit_reason"], m
EOF

step "mas-econ attribute --method chief (scripted model)"
run "$bin/mas-econ" attribute --runs-dir out/w --method chief --model scripted --out attr >"$tmp/attr.log" 2>&1 \
  || { cat "$tmp/attr.log" >&2; fail "mas-econ attribute --method chief"; }
[ -s attr/predictions.jsonl ] || fail "attribute wrote no predictions"

step "the example plugin (examples/plugin) next to the wheel: its provider, benchmark and topology in one sweep"
# built like the project's wheel (the venv's own setuptools may lack bdist_wheel), then installed into the venv
"$python" -m pip wheel --no-deps --no-build-isolation -q -w "$tmp/plugindist" "$tmp/src/examples/plugin" \
  >"$tmp/plugin.log" 2>&1 || { cat "$tmp/plugin.log" >&2; fail "pip wheel examples/plugin"; }
"$tmp/venv/bin/python" -m pip install -q --no-deps --no-index "$tmp"/plugindist/*.whl >>"$tmp/plugin.log" 2>&1 \
  || { cat "$tmp/plugin.log" >&2; fail "pip install examples/plugin"; }
printf '[models.default]\nprovider = "digits"\nmodel = "digit-adder"\n' >plugin.toml
run "$bin/mas-econ" list-benchmarks >benchmarks.txt  # to a file: grep -q stops reading at its first match
grep -qw digit_sum benchmarks.txt || fail "list-benchmarks misses the plugin's digit_sum"
run "$bin/mas-econ" run --config plugin.toml --benchmark digit_sum --systems round_robin,sas --task-limit 2 \
  --output-root out --experiment-id p --progress none >"$tmp/plugin-run.log" 2>&1 \
  || { cat "$tmp/plugin-run.log" >&2; fail "mas-econ run with the plugin's provider"; }
[ "$(find out/p/digit_sum -name 'run_0.result.json' | wc -l)" = 4 ] || fail "the plugin sweep wrote no 4 results"
grep -rqs '"model":"digit-adder"' out/p/digit_sum || fail "no traced call names the plugin provider's model"

step "a distribution that installs its own top-level 'attribution' over ours is named at import"
mkdir -p "$tmp/clash/attribution"
printf '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "attribution-clash"\nversion = "9.9"\n[tool.setuptools]\npackages = ["attribution"]\n' \
  >"$tmp/clash/pyproject.toml"
echo 'CLASH = 1' >"$tmp/clash/attribution/__init__.py"
"$python" -m pip wheel --no-deps --no-build-isolation -q -w "$tmp/clashdist" "$tmp/clash" >"$tmp/clash.log" 2>&1 \
  || { cat "$tmp/clash.log" >&2; fail "building the clashing wheel"; }
"$tmp/venv/bin/python" -m pip install -q --no-deps --no-index "$tmp"/clashdist/*.whl >>"$tmp/clash.log" 2>&1 \
  || { cat "$tmp/clash.log" >&2; fail "installing the clashing wheel"; }
if run "$bin/python" -c "import mas" 2>"$tmp/err"; then fail "import mas went on with another distribution's attribution"; fi
grep -q "ImportError: .*attribution-clash 9.9" "$tmp/err" || fail "the ImportError does not name the distribution: $(tail -1 "$tmp/err")"

echo "check_wheel: ok ($(basename "$wheel"))"
