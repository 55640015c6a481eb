"""Build CHIEF's exemplar pool from the training part of the Who&When dev split.

    python scripts/build_chief_exemplars.py --data-dir ../shared/data/who_and_when/dev \
        --out attribution/methods/chief/exemplars.json

The training part is fixed by a rule that looks at no label: the records whose
file number is 1 modulo 10, of at most 40 steps (9 algorithm-generated, 2
hand-crafted). Their decompositions into subtasks (:data:`SUBTASKS`) were
written by hand from the logs alone (the mistake labels were not used); each
exemplar keeps the question, the agents, the log as CHIEF's prompts render
it (fitted to EXEMPLAR_TOKENS) and the subtasks. Who&When is MIT-licensed
(Ming Yin, 2025). CHIEF retrieves the most similar exemplars per case and
never one from the case itself or its question; ``attribute --method chief``
leaves these records out of the evaluation (see attribution/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.llm.prompt_fit import render_steps, step_views  # noqa: E402
from attribution.sources.loaders import load_who_and_when_file  # noqa: E402
from attribution.llm.prompting import agent_names  # noqa: E402

EXEMPLAR_TOKENS = 220
"""Tokens one exemplar's log may take in a prompt (steps compressed or windowed to fit)."""
MAX_STEPS = 40

# (name, first step, last step) per training record, written from the logs.
SUBTASKS: dict[str, list[tuple[str, int, int]]] = {
    "algorithm_generated/1": [("plan and load the spreadsheet", 0, 1), ("count the even (sunset) addresses", 2, 3),
                              ("verify and answer", 4, 5)],
    "algorithm_generated/11": [("plan", 0, 1), ("search for the discography", 2, 3),
                               ("extract the album table", 4, 9)],
    "algorithm_generated/31": [("plan", 0, 1), ("find the contributors of the version", 2, 3),
                               ("compare the names and conclude", 4, 9)],
    "algorithm_generated/41": [("translate the sentence", 0, 1), ("verify the translation", 2, 5)],
    "algorithm_generated/61": [("plan", 0, 1), ("run the script to build the URL", 2, 4),
                               ("fetch the C++ code from the URL", 5, 9)],
    "algorithm_generated/71": [("plan", 0, 0), ("extract the image count", 1, 4), ("verify and answer", 5, 9)],
    "algorithm_generated/91": [("load the inventory", 0, 3), ("filter the Blu-Ray entries", 4, 9)],
    "algorithm_generated/101": [("plan", 0, 0), ("gather ticket and pass prices", 1, 4),
                                ("compute and verify the savings", 5, 7)],
    "algorithm_generated/121": [("understand the task", 0, 0), ("debug the script", 1, 4), ("verify and answer", 5, 6)],
    "hand_crafted/1": [("plan", 0, 2), ("search for schools near the address", 3, 8),
                       ("check each school's address and classes", 9, 28)],
    "hand_crafted/31": [("plan", 0, 2), ("find the museum's address", 3, 4), ("list gyms within 5 miles", 5, 8),
                        ("check each gym is not a gymnastics center", 9, 28), ("answer", 29, 31)],
}


def in_training_part(subset: str, number: int, n_steps: int) -> bool:
    """The rule fixing the training part (no label looked at)."""
    return number % 10 == 1 and n_steps <= MAX_STEPS


def build(data_dir: Path) -> list[dict]:
    pool = []
    for rid, spans in SUBTASKS.items():
        subset, number = rid.split("/")
        traj = load_who_and_when_file(data_dir / subset / f"{number}.json", subset)
        if not in_training_part(subset, int(number), traj.n_steps):
            raise SystemExit(f"{rid} is not in the training part ({traj.n_steps} steps)")
        covered = [i for _, a, b in spans for i in range(a, b + 1)]
        if covered != list(range(traj.n_steps)):
            raise SystemExit(f"{rid}: the subtasks do not cover steps 0-{traj.n_steps - 1} once each")
        log, _ = render_steps(step_views(traj), EXEMPLAR_TOKENS)
        pool.append({
            "id": rid, "question": " ".join(traj.query.split()), "agents": agent_names(traj),
            "n_steps": traj.n_steps, "log": log,
            "subtasks": [{"name": name, "start": a, "end": b} for name, a, b in spans],
        })
    return pool


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build CHIEF's exemplar pool (see the module docstring).")
    ap.add_argument("--data-dir", type=Path, required=True, help="Who&When dev split")
    ap.add_argument("--out", type=Path, required=True, help="pool file (JSON)")
    args = ap.parse_args(argv)
    pool = build(args.data_dir)
    doc = {"source": "Who&When dev split (MIT, Ming Yin 2025): records numbered 1 mod 10 with <= 40 steps",
           "subtasks": "written by hand from the logs, labels unused", "exemplars": pool}
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(pool)} exemplars to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
