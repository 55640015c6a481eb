"""A model matrix (issue 28): ``--models a,b`` × ``--systems sas,debate`` is one experiment of four (system, model)
units, each on its own route, each MAS compared with the same model's SAS in summaries and report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from descriptor.layout import RunPaths
from descriptor.run_config import read_metadata_with_config

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """[models.default]
provider = "scripted"
[models.a]
provider = "scripted"
[models.b]
provider = "scripted"
price_input_per_1m = 1.0
"""


def test_two_routes_by_two_systems_are_four_units_in_summaries_and_report(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
                           "--task-limit", "2", "--systems", "sas,debate", "--models", "a,b", "--output-root",
                           str(tmp_path), "--experiment-id", "mm", "--progress", "none"],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    root = tmp_path / "mm"
    summary = json.loads((root / "experiment_summary.json").read_text())
    assert sorted(r["system"] for r in summary["rollups"]) == ["debate@a", "debate@b", "sas@a", "sas@b"]
    cost = {r["system"]: r["cost_total"] for r in summary["rollups"]}
    assert cost["sas@a"] == 0 < cost["sas@b"], "each unit ran on its own route (only b is priced)"
    econ = json.loads((root / "economics.json").read_text())["rows"]
    assert sorted((e["system"], e["baseline"]) for e in econ) == [("debate@a", "sas@a"), ("debate@b", "sas@b")]
    meta = read_metadata_with_config(RunPaths.parse(next((root / "arith" / "sas@b").rglob("run_0.metadata.json"))))
    assert meta.config["models"]["default"]["price_input_per_1m"] == 1.0
    assert len(list((root / "configs").iterdir())) == 2, "one config file per route: the units of a route share it"
    page = (root / "report" / "index.html").read_text()
    assert "debate@b solves" in page or "between debate@b and sas@b" in page


def test_a_model_matrix_refuses_an_unknown_route_before_anything_runs(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
                           "--models", "a,nope", "--output-root", str(tmp_path), "--experiment-id", "x"],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 2 and "nope" in proc.stderr
    assert not (tmp_path / "x").exists()
