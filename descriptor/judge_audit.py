"""Do the judges decide well? What the final votes and the consensus decisions of an experiment did, from its
run files.

A debate's answer (and a matched SAS's, and a representative exchange's) is its final vote's winner. When a
judge model casts that vote, the system's success is partly the judge's: a judge that picks by position rather
than by content makes a MAS figure about the judge, not about collaboration. The embedded 0.5B model chose
the second of two candidates in every one of 100 votes (``attribution/README.md``). **Final votes**, per
benchmark × system × voter (a judge model, or the lexical vote alone), over each run's last final vote:

- **contested**: the candidates' normalised answers differ (the trace's ``final_vote`` ``answer_groups``);
- **merged** (judge only): a contested vote whose judge put two differing answers in one group (right for
  answers that differ only in wording, which normalisation does not see), and **mixed**: a right and a wrong
  answer in one group (never right);
- **first** (judge only): contested votes won by the candidate the judge saw first, against chance (1/n for a
  vote among n), by the exact test of :func:`descriptor.stats.poisson_binomial_test`; the judge sees the
  candidates in a seeded shuffle (:func:`mas.topologies.judge.shown_order`), so this is the judge's lean, not an
  agent's merit;
- **split**: contested votes with a right and a wrong candidate, by the benchmark's own verdicts on every
  candidate (``eval.json``'s ``candidate_success``, kept where evaluation is a quick comparison of answers):
  how often the vote's winner was right, with its Wilson interval, against choosing at random (each vote's
  share of right candidates), by the same exact test;
- **outvoted**: failed runs in which a candidate was right.

**Elections** (``representative_exchange``'s groups electing their representatives by the same vote) are
audited alike, every election of every run, in rows of their own (voter ``election judge`` or ``election
lexical``), without split votes or outvoted runs: no verdict on a member's answer is kept.

**Consensus stops**, per benchmark × system: a judge model that groups differing answers as one also ends a
discussion on agreement the agents never reached (with the default ``termination_consensus_mode = "llm_judge"``
the 0.5B model did in 7 of its 16 consensus stops on arith). Over the controller's decisions the judge's grouping
decided: its stops on consensus, and those where it saw more agreement than an exact match of normalised answers
(``consensus_ratio`` above ``lexical_ratio``), which is right only for answers that differ in wording alone.

A run's vote and consensus decisions are digested once, when the run ends (:func:`vote_digest`,
:func:`consensus_digest`, in ``trace_metrics.json``), so summaries and the report read no trace for them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from descriptor.events import Decision, Election, Event, FinalVote, Vote
from descriptor.stats import poisson_binomial_test, wilson_interval

JUDGE_AUDIT_FILE = "judge_audit.json"
"""The audit in the report directory, ``{"votes": [...], "consensus": [...]}`` (the index page's "Judges"
section)."""
BIASED_P = 0.01
"""Below this p-value a judge's lean to (or away from) the first-shown candidate is reported."""
MIN_VOTES = 8
"""Fewest contested votes, split votes or consensus stops a warning is drawn from."""


class VoteDigest(BaseModel):
    """A run's last final vote as the audit reads it (in ``trace_metrics.json``'s digest; checked on reading like
    the rest of that file, so a damaged or foreign one sends the reader back to the trace)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    """``llm_judge``, ``lexical`` or ``lexical_fallback``."""
    judged: bool
    """A judge model was called (its reply decided, or was unusable: ``source`` says which)."""
    n: int = Field(ge=1)
    """Candidates."""
    winner: int
    first: int
    """The candidate the judge saw first (0 when no judge model saw them)."""
    answer_groups: list[list[int]]
    """Candidates with equal normalised answers (empty answers in none)."""
    groups: list[list[int]]
    """The vote's own grouping, as candidate indices."""

    @model_validator(mode="after")
    def _indices_name_candidates(self) -> VoteDigest:
        if any(not 0 <= i < self.n for i in (self.winner, self.first, *chain(*self.answer_groups, *self.groups))):
            raise ValueError(f"an index outside the {self.n} candidates")
        return self

    def answer_of(self) -> list[int | None]:
        """Each candidate's answer group (None: an empty answer, in none)."""
        out: list[int | None] = [None] * self.n
        for g, members in enumerate(self.answer_groups):
            for i in members:
                out[i] = g
        return out

    def merges(self, kinds: Sequence[Any]) -> bool:
        """Whether one of the vote's groups holds candidates of different ``kinds`` (None: left out)."""
        return any(len({kinds[i] for i in g if kinds[i] is not None}) > 1 for g in self.groups)


def _digest(vote: Event, candidates: list[str], winner: int) -> VoteDigest | None:
    p: Vote = vote.payload  # type: ignore[assignment]
    place = {name: i for i, name in enumerate(candidates)}
    try:
        return VoteDigest(source=p.vote_source, judged=vote.model is not None, n=len(candidates), winner=winner,
                          first=p.shown_order[0] if p.shown_order else 0, answer_groups=p.answer_groups,
                          groups=[[place[a] for a in g if a in place] for g in p.groups])
    except ValidationError:
        return None


def vote_digest(events: Sequence[Event]) -> VoteDigest | None:
    """The run's last final vote; None when there is none, it predates the record of its candidates, or its
    indices do not name its candidates (an edited trace)."""
    vote = next((e for e in reversed(events) if isinstance(e.payload, FinalVote)), None)
    if vote is None or not vote.payload.candidates:  # type: ignore[union-attr]
        return None
    return _digest(vote, vote.payload.candidates, vote.payload.winner_index)  # type: ignore[union-attr]


def election_digests(events: Sequence[Event]) -> list[VoteDigest]:
    """The run's elections (``representative_exchange``), in order: its members are the candidates. An election
    written before the record of its lexical grouping, or whose winner is no member, is left out."""
    out = []
    for e in events:
        p = e.payload
        if isinstance(p, Election) and "answer_groups" in p.model_fields_set and p.elected in p.members:
            d = _digest(e, p.members, p.members.index(p.elected))
            if d is not None:
                out.append(d)
    return out


class ConsensusDigest(BaseModel):
    """A run's consensus decisions that a judge model's grouping decided (in ``trace_metrics.json``'s digest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    judged: int = Field(ge=0)
    """Controller decisions whose consensus the judge model's grouping decided."""
    stops: int = Field(ge=0)
    """Of them, the loop stopped on consensus."""
    beyond_exact: int = Field(ge=0)
    """Of those stops, the judge saw more agreement than an exact match of normalised answers."""


def consensus_digest(events: Sequence[Event]) -> ConsensusDigest | None:
    """The judge's consensus decisions of a run; None when a judge model decided none."""
    judged = [e.payload for e in events if isinstance(e.payload, Decision) and e.payload.consensus_source == "llm_judge"]
    if not judged:
        return None
    stops = [d for d in judged if d.stop and d.reason == "consensus_reached"]
    return ConsensusDigest(judged=len(judged), stops=len(stops), beyond_exact=sum(
        1 for d in stops if d.lexical_ratio is not None and d.lexical_ratio < d.consensus_ratio))


@dataclass(kw_only=True, slots=True)
class AuditRow:
    """One run's part in the audit."""

    benchmark: str
    system: str
    success: bool
    vote: VoteDigest | None
    """:func:`vote_digest` of the run's trace."""
    elections: Sequence[VoteDigest] = ()
    """:func:`election_digests` of the run's trace."""
    candidate_success: list[bool] | None = None
    consensus: ConsensusDigest | None = None
    """:func:`consensus_digest` of the run's trace."""


def _line(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "lo": lo, "hi": hi}


def audit_votes(rows: Sequence[AuditRow]) -> list[dict[str, Any]]:
    """Per benchmark × system × voter (``judge``: final votes a judge model was called for; ``lexical``: the
    lexical vote alone; ``election judge`` and ``election lexical``: the same for every election): the figures of
    the module docstring and a ``warning`` sentence (None when nothing is amiss or there are too few votes to
    tell). Lexical votes have no order shown and no grouping of their own: their ``merged``, ``mixed``, ``first``
    and ``first_p`` are None."""
    units: dict[tuple[str, str, str], list[AuditRow]] = {}
    for r in rows:
        if r.vote is not None:
            units.setdefault((r.benchmark, r.system, "judge" if r.vote.judged else "lexical"), []).append(r)
        for e in r.elections:  # no verdicts on a member's answer: no split votes, none outvoted
            units.setdefault((r.benchmark, r.system, "election judge" if e.judged else "election lexical"),
                             []).append(AuditRow(benchmark=r.benchmark, system=r.system, success=r.success, vote=e))
    out = []
    for (bench, system, voter), runs in sorted(units.items()):
        judged = voter.endswith("judge")
        decided = [r for r in runs if not judged or r.vote.source == "llm_judge"]  # unusable replies: lexical
        contested = [r for r in decided if len(r.vote.answer_groups) >= 2]
        first = sum(1 for r in contested if r.vote.winner == r.vote.first)
        split = [r for r in contested if r.candidate_success is not None and len(r.candidate_success) == r.vote.n
                 and any(r.candidate_success) and not all(r.candidate_success)]
        right = sum(1 for r in split if r.candidate_success[r.vote.winner])  # type: ignore[index]
        chance = [sum(r.candidate_success) / r.vote.n for r in split]  # type: ignore[arg-type]
        row = {
            "benchmark": bench, "system": system, "voter": voter, "votes": len(runs),
            "unusable": len(runs) - len(decided), "contested": len(contested),
            "merged": sum(1 for r in contested if r.vote.merges(r.vote.answer_of())) if judged else None,
            "mixed": sum(1 for r in split if r.vote.merges(r.candidate_success)) if judged else None,
            "first": _line(first, len(contested)) if judged else None,
            "first_chance": sum(1 / r.vote.n for r in contested) / len(contested) if judged and contested else None,
            "first_p": poisson_binomial_test(first, [1 / r.vote.n for r in contested]) if judged else None,
            "split": _line(right, len(split)), "split_chance": sum(chance) / len(chance) if chance else None,
            "split_p": poisson_binomial_test(right, chance),
            "outvoted": None if voter.startswith("election") else sum(
                1 for r in runs if not r.success and r.candidate_success and any(r.candidate_success)),
        }
        row["warning"] = _warning(row)
        out.append(row)
    return out


def _warning(row: dict[str, Any]) -> str | None:
    """One sentence when the judge chose by position, grouped a right and a wrong answer as one in at least half
    the votes between them, or the vote chose no better than at random, with the figures behind it."""
    election = row["voter"].startswith("election")
    unit = f"{row['benchmark']}/{row['system']}" + (" (elections)" if election else "")
    instead = f" (--set mas.{'election_mode' if election else 'final_vote_mode'}=lexical calls no judge)"
    f, s = row["first"], row["split"]
    if f is not None and f["n"] >= MIN_VOTES and row["first_p"] < BIASED_P:
        return (f"{unit}: the judge's choice followed the order it saw the candidates in: the one shown first won "
                f"{f['k']} of {f['n']} contested votes (chance {row['first_chance']:.2f}, p = {row['first_p']:.2g}), "
                f"so the system's success says more about that order than about the judge's reading{instead}")
    if row["mixed"] is not None and s["n"] >= MIN_VOTES and row["mixed"] >= s["n"] / 2:
        return (f"{unit}: the judge grouped a right and a wrong answer as one in {row['mixed']} of {s['n']} votes "
                f"between them: it does not compare the candidates' answers{instead}")
    if s["n"] >= MIN_VOTES and s["rate"] <= row["split_chance"]:
        return (f"{unit}: where one candidate was right and another wrong, the {row['voter']} vote chose a right "
                f"one in {s['k']} of {s['n']} votes ({s['rate']:.2f}, chance {row['split_chance']:.2f}): it does "
                "no better than choosing at random")
    return None


def audit_consensus(rows: Sequence[AuditRow]) -> list[dict[str, Any]]:
    """Per benchmark × system with a consensus decision a judge model decided: runs, such decisions, its stops on
    consensus and those beyond an exact match (module docstring), with a ``warning`` when a quarter or more of
    :data:`MIN_VOTES` or more stops were (a prompt to look: for numbers every one is wrong, for prose some may be
    right)."""
    units: dict[tuple[str, str], list[ConsensusDigest]] = {}
    for r in rows:
        if r.consensus is not None:
            units.setdefault((r.benchmark, r.system), []).append(r.consensus)
    out = []
    for (bench, system), runs in sorted(units.items()):
        stops, beyond = sum(c.stops for c in runs), sum(c.beyond_exact for c in runs)
        warning = None
        if stops >= MIN_VOTES and beyond >= stops / 4:
            warning = (f"{bench}/{system}: the judge declared consensus on answers that differ after normalisation in "
                       f"{beyond} of its {stops} consensus stops, so the discussion ended on agreement an exact match "
                       "does not show (right only where they differ in wording alone: the run viewer shows them; "
                       "--set mas.termination_consensus_mode=lexical calls no judge)")
        out.append({"benchmark": bench, "system": system, "runs": len(runs), "judged": sum(c.judged for c in runs),
                    "stops": stops, "beyond_exact": beyond, "warning": warning})
    return out


def audit(rows: Sequence[AuditRow]) -> dict[str, list[dict[str, Any]]]:
    """The whole audit (:data:`JUDGE_AUDIT_FILE`): :func:`audit_votes` and :func:`audit_consensus`."""
    return {"votes": audit_votes(rows), "consensus": audit_consensus(rows)}


def audit_warnings(report_dir: str | Path) -> list[str]:
    """The warnings of the audit a report wrote (none when it wrote none, or the file is unreadable)."""
    try:
        data = json.loads((Path(report_dir) / JUDGE_AUDIT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    rows = [r for part in ("votes", "consensus") for r in (data.get(part) or [] if isinstance(data, dict) else [])]
    return [r["warning"] for r in rows if isinstance(r, dict) and isinstance(r.get("warning"), str)]
