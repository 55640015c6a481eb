"""Optional extras: the core install carries only what every run needs, and a feature whose extra is missing says in
one line which ``pip install`` adds it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from descriptor.errors import UserError
from descriptor.extras import EXTRAS, missing_extra, require_extra
from main import main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_every_extra_named_in_code_is_in_pyproject_and_none_is_a_core_dependency():
    optional = PYPROJECT["optional-dependencies"]
    core = _names(PYPROJECT["dependencies"])
    assert set(EXTRAS) <= set(optional)
    for extra in EXTRAS:
        assert not _names(optional[extra]) & core, extra  # a feature's packages are not in every install
    assert not {"dask", "distributed", "pyarrow", "inspect-ai", "datasets"} & core


def test_a_missing_extra_is_one_line_naming_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an import of it fails as if it were not installed
    with pytest.raises(UserError) as err:
        require_extra("parquet", "to_parquet")
    assert str(err.value) == missing_extra("parquet", "to_parquet")
    assert "\n" not in str(err.value) and "pip install 'mas-econ[parquet]'" in str(err.value)


def test_to_parquet_without_pyarrow_says_which_extra(monkeypatch, tmp_path):
    from descriptor.frames import to_parquet

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(UserError, match=r"to_parquet .*needs the optional extra 'parquet'.*pip install 'mas-econ\[parquet\]'"):
        to_parquet(tmp_path)


def test_dask_executor_without_dask_fails_before_any_run_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(["run", "--benchmark", "arith", "--model", "scripted", "--executor", "dask", "--task-limit", "1",
                 "--output-root", str(tmp_path), "--experiment-id", "e"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--executor dask needs the optional extra 'dask'" in err
    assert "pip install 'mas-econ[dask]'" in err
    assert not (tmp_path / "e").exists()
