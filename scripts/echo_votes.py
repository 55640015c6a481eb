"""ECHO's answer under both vote rules, recomputed from one run's recorded model outputs.

    python scripts/echo_votes.py OUT [--delta 0.3] [--json FILE]

``OUT`` is an ``attribute --method echo`` output directory (or its
``predictions.jsonl``). Every case records its analysts' parsed outputs (and,
in the project variant, its step judgments and candidates; see
``attribution/methods/echo/vote.py`` and ``echo/consensus.py``); this
script replays :func:`decide` under ``paper`` and ``weighted_share`` and prints
agent and step accuracy (exact, ±1, ±3) per subset, side by side, on the
same model outputs. In the paper variant both rules vote on the same two
passes, so every step is known. In the project variant a step is known under
a rule only when the run judged that rule's agent: run it with
``--method-option compare_votes=true`` to judge both rules' agents (otherwise
cases where the rules elect different agents count as ``step unknown`` for
the rule the run did not use). The replay of the run's own rule must equal
its predictions (a step where the environment spoke compared before it moved
to the action it reacts to); a mismatch is reported (and exits 1), so the
figures are the method's, not a copy of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.evaluate import agent_correct, step_within  # noqa: E402
from attribution.methods.echo.consensus import decide  # noqa: E402
from attribution.methods.echo.vote import DELTA, VOTES  # noqa: E402

TOLERANCES = (0, 1, 3)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Rows of a predictions file (``path`` or ``path/predictions.jsonl``)."""
    file = path / "predictions.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise SystemExit(f"echo_votes: {file} not found (expected an attribute output directory or predictions.jsonl)")
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def replay(records: list[dict[str, Any]], delta: float = DELTA) -> dict[str, Any]:
    """Per subset (and ``all``) and rule: n, agent accuracy, step accuracy within TOLERANCES, unknown steps;
    plus how often the rules agree and any case where the replay of the run's rule differs from its prediction."""
    groups: dict[str, list[dict[str, Any]]] = {}
    skipped, mismatches = [], []
    for r in records:
        d = r.get("details") or {}
        if r.get("error") or "analyses" not in d:
            skipped.append(r["id"])  # a failed case, or a run made before outputs were recorded
            continue
        out = {rule: decide(d, rule, delta) for rule in VOTES}
        own = out[d.get("vote", "weighted_share")]
        predicted_step = d.get("environment_step", r["predicted_step"])
        if (own.agent, own.step) != (r["predicted_agent"], predicted_step):
            mismatches.append({"id": r["id"], "predicted": [r["predicted_agent"], r["predicted_step"]],
                               "replayed": [own.agent, own.step]})
        row = {"record": r, "decisions": out}
        groups.setdefault(r["subset"], []).append(row)
        groups.setdefault("all", []).append(row)
    table: dict[str, Any] = {}
    for subset, rows in groups.items():
        per_rule = {}
        for rule in VOTES:
            ds = [(row["record"], row["decisions"][rule]) for row in rows]
            known = [(rec, dec) for rec, dec in ds if dec.step is not None]
            per_rule[rule] = {
                "n": len(ds),
                "agent": sum(agent_correct(dec.agent, rec["gold_agent"]) for rec, dec in ds) / len(ds),
                **{f"step±{t}" if t else "step": (sum(step_within(dec.step, rec["gold_step"], t) for rec, dec in known)
                                                  / len(known) if known else None) for t in TOLERANCES},
                "step_known": len(known),
            }
        per_rule["agreement"] = {
            "same_agent": sum(row["decisions"]["paper"].agent == row["decisions"]["weighted_share"].agent
                              for row in rows) / len(rows),
            "same_step": sum(row["decisions"]["paper"].step == row["decisions"]["weighted_share"].step
                             for row in rows) / len(rows),
        }
        table[subset] = per_rule
    return {"delta": delta, "subsets": table, "skipped": skipped, "mismatches": mismatches}


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="attribute output directory (or predictions.jsonl) of an echo run")
    ap.add_argument("--delta", type=float, default=DELTA, help=f"δ for both rules (default {DELTA})")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    res = replay(read_records(args.out), args.delta)
    print(f"{'subset':20s} {'vote':15s} {'n':>4s} {'agent':>6s} {'step':>6s} {'±1':>6s} {'±3':>6s} {'step known':>10s}")
    for subset, per_rule in res["subsets"].items():
        for rule in VOTES:
            m = per_rule[rule]
            print(f"{subset:20s} {rule:15s} {m['n']:4d} {_fmt(m['agent']):>6s} {_fmt(m['step']):>6s} "
                  f"{_fmt(m['step±1']):>6s} {_fmt(m['step±3']):>6s} {m['step_known']:10d}")
        agree = per_rule["agreement"]
        print(f"{subset:20s} {'(agreement)':15s}      same agent {_fmt(agree['same_agent'])}, "
              f"same step {_fmt(agree['same_step'])}")
    if res["skipped"]:
        print(f"skipped {len(res['skipped'])} case(s) without recorded analyst outputs (failed, or an older run)")
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    if res["mismatches"]:
        print(f"MISMATCH: the replay of the run's own vote differs from {len(res['mismatches'])} prediction(s): "
              f"{res['mismatches'][:3]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
