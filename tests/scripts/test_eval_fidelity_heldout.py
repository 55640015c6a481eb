"""``scripts/eval_fidelity_heldout.py``: the paper and project variants of ECHO and CHIEF on the held-out records, in
rounds, resumable, with Wilson intervals and the paired comparison."""

from __future__ import annotations

import json
from pathlib import Path

from attribution.conformal.heldout import heldout_split, write_split
from attribution.sources.loaders import load_who_and_when_dir
from tests.scripts_loader import load_script
from tests.attribution.test_attribution_methods import make_traj

AGENTS = ["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"]


def write_records(root: Path) -> None:
    """Eight small records, four per subset, each with its own question and a marked decisive step."""
    for n in range(8):
        subset = ("algorithm_generated", "hand_crafted")[n % 2]
        traj = make_traj(AGENTS, 2 + n % 4, tid=str(n))
        record = {"question": f"Question number {n}: how many rows?", "ground_truth": "42",
                  "mistake_agent": traj.mistake_agent, "mistake_step": str(traj.mistake_step),
                  "history": [{"content": s.content, "name": s.agent, "role": "user"} for s in traj.steps]}
        path = root / subset / f"{n}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record), encoding="utf-8")


def test_the_script_runs_every_variant_over_the_same_records_and_resumes(tmp_path: Path, capsys) -> None:
    script = load_script("eval_fidelity_heldout")
    dev = tmp_path / "dev"
    write_records(dev)
    split = heldout_split(load_who_and_when_dir(dev, "all").trajectories, fraction=0.5, seed=0)
    write_split(split, tmp_path / "split.json")
    out = tmp_path / "out"
    argv = ["--model", "scripted", "--out", str(out), "--dev-dir", str(dev), "--split", str(tmp_path / "split.json"),
            "--max-records", "1"]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"echo_paper", "echo_project", "chief_paper", "chief_project"}
    assert set(summary["pairs"]) == {"echo_paper vs echo_project", "chief_paper vs chief_project"}
    held = {i.split("/")[0] for i in split.heldout_ids}
    for v in summary["variants"].values():
        m = v["subsets"]["all"]
        assert m["n"] == len(held) and m["agent"]["n"] == m["n"]  # one record per subset in round 1
        lo, hi = m["agent"]["wilson95"]
        assert lo <= m["agent"]["rate"] <= hi and m["mean_calls"] >= 1
    assert summary["variants"]["echo_paper"]["subsets"]["all"]["mean_calls"] == 6  # 2 passes x 3 analysts
    assert "[95% Wilson]" in printed and "exact sign test p" in printed
    # The same command again keeps what is finished; one more record per subset runs only the new ones.
    assert script.main(argv) == 0
    results = json.loads((out / "runs" / "echo_paper" / "algorithm_generated" / "results.json").read_text())
    assert results["n_resumed"] == results["n_cases"] == 1
    assert script.main([*argv[:-1], "2"]) == 0
    results = json.loads((out / "runs" / "echo_paper" / "algorithm_generated" / "results.json").read_text())
    assert (results["n_cases"], results["n_resumed"]) == (2, 1)
    capsys.readouterr()
    assert script.main(["--out", str(out), "--report-only"]) == 0 and "echo_paper" in capsys.readouterr().out
    # Bad input: a clear message and exit 2.
    assert script.main(["--out", str(out), "--dev-dir", str(dev)]) == 2
    assert "--model" in capsys.readouterr().err
    assert script.main([*argv, "--variant", "no-method"]) == 2
    assert "NAME=METHOD" in capsys.readouterr().err
