"""The compute-matched SAS (issue 28): k SAS samples and the MAS's final vote, k matched to another system's
tokens per run on the same tasks; the report compares each MAS with the plain and the matched SAS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest

from descriptor.errors import UserError
from mas.sweep.matching import check_matching

ROOT = Path(__file__).resolve().parents[2]


def test_matched_k_brings_sas_within_15_percent_of_debates_tokens_and_the_report_compares_both(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--model", "scripted", "--benchmark", "arith",
                           "--task-limit", "4", "--systems", "sas,debate,sas_matched", "--set",
                           'systems.sas_matched.match="debate"', "--output-root", str(tmp_path), "--experiment-id", "m",
                           "--progress", "none"], cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    root = tmp_path / "m"
    results = [json.loads(p.read_text()) for p in root.rglob("run_*.result.json")]
    tokens = {s: mean(r["tokens_total"] for r in results if r["system"] == s) for s in ("sas", "debate", "sas_matched")}
    assert abs(tokens["sas_matched"] - tokens["debate"]) <= 0.15 * tokens["debate"], tokens
    assert tokens["sas_matched"] > 2 * tokens["sas"], "matching must make the SAS spend more than one sample"
    chosen = json.loads((root / "sas_matched.json").read_text())["arith"]
    metas = [json.loads(p.read_text()) for p in (root / "arith" / "sas_matched").rglob("run_*.metadata.json")]
    assert metas and all(m["system_options"] == {"k": chosen["k"]} for m in metas)
    trace = next((root / "arith" / "sas_matched").rglob("run_0.trace.jsonl")).read_text()
    assert len({json.loads(line)["actor"] for line in trace.splitlines()} & {f"solver_{i}" for i in range(64)}) \
        == chosen["k"]
    page = (root / "report" / "index.html").read_text()
    assert "debate" in page and "Against the compute-matched SAS (sas_matched" in page


def test_matching_needs_its_target_and_the_plain_sas_in_the_sweep():
    check_matching(["sas", "debate", "sas_matched"], "debate")
    with pytest.raises(UserError, match=r"needs debate in --systems"):
        check_matching(["sas", "sas_matched"], "debate")
    with pytest.raises(UserError, match=r"needs sas in --systems"):
        check_matching(["debate", "sas_matched"], "debate")
