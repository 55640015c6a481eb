"""Two attribution runs side by side on the cases both finished (e.g. CHIEF before and after a change).

    python scripts/compare_predictions.py OLD_OUT NEW_OUT

Each argument is an ``attribute`` output directory (or its ``predictions.jsonl``).
Metrics are :func:`attribution.evaluate.attribution_metrics` of each run
restricted to the case ids present (without error) in both, so a run that
left records out (CHIEF leaves its exemplar pool's records out) is compared
on the same cases.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.evaluate import CaseRecord, attribution_metrics  # noqa: E402


def read(path: Path) -> dict[str, CaseRecord]:
    file = path / "predictions.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise SystemExit(f"compare_predictions: {file} not found")
    rows = [CaseRecord.model_validate_json(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r.id: r for r in rows if r.error is None}


def compare(old: dict[str, CaseRecord], new: dict[str, CaseRecord]) -> dict[str, dict]:
    common = [i for i in old if i in new]
    return {"old": attribution_metrics([old[i] for i in common]), "new": attribution_metrics([new[i] for i in common])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    res = compare(read(args.old), read(args.new))
    print(f"{'subset':20s} {'run':4s} {'n':>4s} {'agent':>6s} {'step':>6s} {'±1':>6s} {'±3':>6s} {'tokens':>7s} {'calls':>6s}")
    for subset in res["old"]:
        for run in ("old", "new"):
            m = res[run][subset]
            w = m["step_accuracy_within"]
            print(f"{subset:20s} {run:4s} {m['n']:4d} {m['agent_accuracy']:6.3f} {m['step_accuracy']:6.3f} "
                  f"{w['1']:6.3f} {w['3']:6.3f} {m['mean_tokens']:7.0f} {m.get('mean_nfe', float('nan')):6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
