"""Issue 30 item 7: the sandbox works with the interpreter installed anywhere, and says which step failed when not.

The default interpreter of this project lives under ``$HOME`` (pyenv in /root/.pyenv), so every sandbox test
covers that prefix; here a venv under ``/tmp`` and one under ``/var/tmp`` run the same checks: code runs, numpy
imports, the host's ``/tmp`` shows nothing but the path to the interpreter, and site-packages are empty.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import benchmark.sandbox.process as sandbox
import benchmark.sandbox.view as sandbox_view
from benchmark.sandbox import SandboxUnavailable

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys
import numpy
site = [p for p in os.listdir(os.path.dirname(os.__file__)) if p.endswith("-packages")]
packages = {p: os.listdir(os.path.join(os.path.dirname(os.__file__), p)) for p in site}
print(json.dumps({"executable": sys.executable, "tmp": sorted(os.listdir("/tmp")), "venv_site": os.listdir(VENV_SITE),
                  "stdlib_site": packages, "numpy": int(numpy.arange(4).sum())}))
"""

DRIVER = """
import sys
from benchmark.sandbox import run_python
res = run_python(sys.stdin.read(), timeout_s=60)
sys.stdout.write(res.stdout if res.ok else "FAILED " + res.stderr)
"""


@pytest.fixture(params=["/tmp", "/var/tmp"])
def venv(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A venv (system site-packages, no pip) under the prefix, with a planted file beside it."""
    root = Path(tempfile.mkdtemp(prefix="mas-venv-", dir=request.param))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root / "venv")],
                       check=True, timeout=120)
        (root / "planted.txt").write_text("host file")
        yield root / "venv"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_venv_under_a_tmp_prefix_runs_sandboxed_code(venv: Path) -> None:
    site = next((venv / "lib").glob("python3*/site-packages"))
    code = PROBE.replace("VENV_SITE", repr(str(site)))
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", DRIVER], input=code, capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert proc.returncode == 0 and not proc.stdout.startswith("FAILED"), proc.stdout + proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["executable"] == str(venv / "bin" / "python") and seen["numpy"] == 6
    top = venv.parent.parent  # /tmp or /var/tmp
    expected_tmp = [venv.parent.name] if str(top) == "/tmp" else []
    assert seen["tmp"] == expected_tmp  # no host file of /tmp but the way to the interpreter
    assert seen["venv_site"] == [] and all(v == [] for v in seen["stdlib_site"].values())


def test_a_failed_isolation_step_is_named_before_the_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = f"/nonexistent-{uuid.uuid4().hex}"
    monkeypatch.setattr(sandbox_view, "package_binds", lambda: ((missing, f"{sandbox_view.SANDBOX_SITE}/x"),))
    with pytest.raises(SandboxUnavailable) as err:
        sandbox.run_python("print(1)")
    message = str(err.value)
    assert f"step 'bind the allowed package {missing}" in message
    assert message.index("step '") < message.index("unsafe-no-namespaces")
    assert "User namespaces work here" in message
