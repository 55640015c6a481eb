"""A small scripted experiment reproduces the golden one, apart from versions, ids and wall-clock values.

``tests/golden/experiment`` holds traces, results, descriptors and summaries of

    python main.py run --benchmark arith --systems sas,supervisor,debate,orchestrator --model scripted \\
        --task-limit 2 --runs-per-task 1 --seed 3 --inject-errors 0.5 --experiment-id g

as the code wrote them before the house was restructured (trace version 1, commit 9c6fdec). Refactors must
leave every value equal; a change of behaviour on purpose regenerates the files with
``python tests/golden/regenerate.py`` and says so in its commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from descriptor.events import upgrade_v1
from mas.config import ExperimentConfig, ModelRoute
from mas.sweep.experiment import ExperimentRequest, run_experiment

GOLDEN = Path(__file__).parents[1] / "golden" / "experiment"

# Wall-clock values, random or per-run ids, and version fields.
VOLATILE = {"version", "run_id", "timestamp_start", "timestamp_end", "latency_ms", "state_id", "tool_call_id",
            "wall_time_s", "latency_total_ms", "latency_total", "latency_p95", "C1_latency_p50", "C1_latency_p95",
            "C1_latency_mean", "C1_latency_total", "latency_total_mean", "span_id", "parent_span_id"}


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        # Version 1 wrote a payload's null keys; version 2 leaves null fields out.
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE and "latency" not in k and v is not None}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def trace_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        out.append(strip(upgrade_v1(data) if data.get("version") == 1 else data))
    return out


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    import asyncio

    root = tmp_path_factory.mktemp("golden")
    cfg = ExperimentConfig(output_root=str(root), seed=3, models={"default": ModelRoute(provider="scripted",
                                                                                        model="scripted")})
    cfg = cfg.model_copy(update={"inject": cfg.inject.model_copy(update={"rate": 0.5})})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["sas", "supervisor", "debate", "orchestrator"],
                            task_limit=2, runs_per_task=1, experiment_id="g", progress="none")
    asyncio.run(run_experiment(req))
    from descriptor.summaries import summarize_experiment

    summarize_experiment(root / "g", plots=False)
    return root / "g"


def golden_files(pattern: str) -> list[Path]:
    return sorted(p.relative_to(GOLDEN) for p in GOLDEN.rglob(pattern))


@pytest.mark.parametrize("rel", golden_files("*.trace.jsonl"), ids=str)
def test_traces_equal_the_golden_ones(experiment, rel):
    got = trace_lines(experiment / rel)
    # Model calls record their route since issue 31, which the golden traces predate: the one route here.
    want = trace_lines(GOLDEN / rel)
    assert {e.pop("route", "default") for e in got} == {e.pop("route", "default") for e in want} == {"default"}
    assert got == want


@pytest.mark.parametrize("rel", golden_files("run_*.result.json") + golden_files("descriptor.json")
                         + [Path("experiment_summary.json"), Path("economics.json")], ids=str)
def test_records_and_summaries_equal_the_golden_ones(experiment, rel):
    got, want = (strip(json.loads((root / rel).read_text(encoding="utf-8"))) for root in (experiment, GOLDEN))
    if rel.name == "experiment_summary.json":
        got.pop("issues", None), want.pop("issues", None)
        # Added with errored runs (issue 18): none here, so every other value must stay as it was.
        for summary in (got, want):
            assert summary.pop("n_errors", 0) == 0
            rows = [*summary["rollups"], *(s for b in summary["benchmarks"].values() for s in b["systems"].values())]
            for row in rows:
                assert (row.pop("n_errors", 0), row.pop("error_rate", 0.0)) == (0, 0.0)
            assert not any(b.pop("error_rates_differ", False) for b in summary["benchmarks"].values())
    if rel.name.endswith(".result.json") and "status" not in want:
        got.pop("status", None)  # added in version 2
    if rel.name.endswith(".result.json") and "limit" not in want:
        assert got.pop("limit", None) is None  # added with budgets (issue 28): no limit set here
    assert got == want
