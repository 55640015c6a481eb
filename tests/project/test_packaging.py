"""The project as a library: console script, --version with the commit or why not, data files in the wheel,
init-config, and another distribution's same-named package named at import (scripts/check_wheel.sh does it for real)."""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import subprocess
import tomllib
from pathlib import Path

import pytest

from mas_econ.cli import main
from descriptor import ownership
from mas.sweep.provenance import NOT_A_CHECKOUT, git_commit

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_prints_the_version_and_the_git_commit(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    sha, reason = git_commit()
    assert out.startswith("mas-econ ") and (f"(git {sha})" in out if sha else reason in out)


def test_outside_a_git_checkout_the_commit_is_unknown_with_the_reason(tmp_path):
    assert git_commit.__wrapped__(tmp_path) == (None, NOT_A_CHECKOUT)
    # a directory inside some other repository (a venv in a checkout) does not take that repository's commit
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "site").mkdir()
    assert git_commit.__wrapped__(tmp_path / "site") == (None, NOT_A_CHECKOUT)


def test_init_config_writes_the_example_and_never_overwrites(tmp_path, capsys):
    target = tmp_path / "exp.toml"
    assert main(["init-config", str(target)]) == 0
    assert target.read_bytes() == (ROOT / "config" / "experiment.example.toml").read_bytes()
    target.write_text("mine")
    assert main(["init-config", str(target)]) == 2
    assert "not overwritten" in capsys.readouterr().err and target.read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["exp.toml"]  # no temporary file left


def test_the_wheel_installs_a_console_script_and_no_top_level_module():
    assert PYPROJECT["project"]["scripts"]["mas-econ"] == "mas_econ.cli:console"
    assert PYPROJECT["tool"]["setuptools"]["py-modules"] == []
    from mas_econ.cli import console

    assert callable(console)


def test_every_data_file_of_the_packages_is_package_data():
    """Each non-Python file git tracks in a package (READMEs aside) matches a package-data glob, and each package
    ships py.typed."""
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    files = subprocess.run(["git", "ls-files", *ownership.PACKAGES], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for f in files:
        if f.endswith((".py", "README.md")):
            continue
        owners = [pkg for pkg in data if f.startswith(pkg.replace(".", "/") + "/")]
        if not any(fnmatch.fnmatch(f[len(pkg) + 1:], glob) for pkg in owners for glob in data[pkg]):
            missing.append(f)
    assert missing == []
    for pkg in ownership.PACKAGES:
        assert "py.typed" in data[pkg] and (ROOT / pkg / "py.typed").is_file()


def test_the_ownership_check_guards_every_top_level_package_the_wheel_installs():
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted({name.split(".")[0] for name in include}) == sorted(ownership.PACKAGES)
    for pkg in ownership.PACKAGES:  # each one's face runs the check, so importing any of them alone is guarded
        assert "\ncheck_packages()" in (ROOT / pkg / "__init__.py").read_text(encoding="utf-8"), pkg


def _site(tmp_path: Path, dist: str, version: str, package: str, body: bytes, hashed: bytes) -> Path:
    """A site directory with ``package/__init__.py`` = ``body`` and a distribution whose RECORD claims it."""
    site = tmp_path / f"site-{dist}"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_bytes(body)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(hashed).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"{package}/__init__.py,sha256={digest},{len(hashed)}\n{info.name}/RECORD,,\n")
    return site


@pytest.fixture
def fresh_record():
    ownership._record.cache_clear()
    yield
    ownership._record.cache_clear()


def test_another_distributions_package_is_named_at_import(tmp_path, monkeypatch, fresh_record):
    site = _site(tmp_path, "attribution-clash", "9.9", "attribution", b"CLASH = 1\n", b"CLASH = 1\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ImportError, match=r"distribution attribution-clash 9\.9 .*pip uninstall attribution-clash"):
        ownership.check_package("attribution", site / "attribution" / "__init__.py")


def test_our_installed_package_and_an_unclaimed_one_pass(tmp_path, monkeypatch, fresh_record):
    ours = _site(tmp_path, "mas-econ", "0.1.0", "mas", b"ours\n", b"ours\n")
    monkeypatch.syspath_prepend(str(ours))
    ownership.check_package("mas", ours / "mas" / "__init__.py")  # the file mas-econ installed
    loose = tmp_path / "loose"
    (loose / "benchmark").mkdir(parents=True)
    (loose / "benchmark" / "__init__.py").write_text("x = 1\n")
    ownership.check_package("benchmark", loose / "benchmark" / "__init__.py")  # nobody else claims it
    ownership.check_package("mas", ROOT / "mas" / "__init__.py")  # the source checkout
