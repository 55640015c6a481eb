"""CHIEF's virtual oracles in the project variant: synthesised in one call, checked against the steps in another.

CHIEF (section 4.2.1) prunes the search with virtual oracles: what each
subtask should have achieved. This is ``chief(variant="project")``'s version:
the oracle comes from the task and the decomposition alone, where D's prompt (the paper variant,
:mod:`attribution.methods.chief.paper`) also gives the history with the later steps, the
exemplars and the earlier oracles. Two stages:

1. synthesis (``attribution.chief.oracle``): from the task and the
   decomposition alone (subtask names and step ranges, no step text), each
   subtask's goal, preconditions, key evidence and acceptance criteria.
   Batched by the reply: ORACLE_REPLY_TOKENS per subtask.
2. verdict (``attribution.chief.verdict``): the subtasks' steps beside their
   oracles; whether the steps met the acceptance criteria. Batched by the
   reply (VERDICT_REPLY_TOKENS per subtask) and by the prompt: a long subtask
   gets a call of its own (:func:`oracle_batches`), so its log is compressed
   no more than when judged alone.

A subtask missing from a reply gets empty fields (synthesis) or no verdict
(``satisfied: None``), recorded as fallbacks.
"""

from __future__ import annotations

import re
from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.llm.prompting import clip, estimate_tokens, messages, render_steps, step_views
from attribution.llm.replies import YesNo, contract, many, one_of, schema_of, text
from attribution.methods.chief.graph import Subtask
from attribution.sources.trajectory import Trajectory

ORACLE_FIELDS = ("goal", "preconditions", "key_evidence", "acceptance")
ORACLE_FIELD_CHARS = 60
ORACLE_REPLY_TOKENS = 100
"""Reply tokens one oracle takes (four 60-character fields, JSON syntax): sets the synthesis batch size."""
VERDICT_REPLY_TOKENS = 40
"""Reply tokens one verdict takes (a short reason, yes or no, JSON syntax): sets the verdict batch size."""
ORACLE_FIXED_TOKENS = 350
"""Tokens of a verdict prompt's fixed text besides the header and the oracles (instructions)."""


def oracle_batches(
    subtasks: list[Subtask], reply_tokens: int, sizes: list[int] | None = None, budget: int | None = None,
    per_item: int = ORACLE_REPLY_TOKENS,
) -> list[list[Subtask]]:
    """Consecutive subtasks grouped so that one call holds all their replies.

    A batch takes at most ``reply_tokens // per_item`` subtasks and, when
    ``sizes`` (tokens of each subtask's full log) and ``budget`` (tokens for
    steps in a prompt) are given, only as many as fit whole together.

    >>> subs = [Subtask(index=i, name="s", start=i, end=i) for i in range(5)]
    >>> [len(b) for b in oracle_batches(subs, 256)]
    [2, 2, 1]
    >>> [len(b) for b in oracle_batches(subs, 512, sizes=[10, 10, 95, 10, 10], budget=100)]
    [2, 1, 2]
    """
    per_call = max(1, reply_tokens // per_item)
    sizes = sizes or [0] * len(subtasks)
    limit = budget if budget is not None else float("inf")
    batches: list[list[Subtask]] = []
    used = 0
    for sub, size in zip(subtasks, sizes, strict=True):
        if batches and len(batches[-1]) < per_call and used + size <= limit:
            batches[-1].append(sub)
            used += size
        else:
            batches.append([sub])
            used = size
    return batches


def resolve_index(value: Any, allowed: set[int]) -> int | None:
    """``value`` as one of ``allowed`` integers, or None."""
    if isinstance(value, bool):
        return None
    m = re.search(r"-?\d+", str(value)) if value is not None else None
    return int(m.group()) if m and int(m.group()) in allowed else None


def oracle_items(obj: dict[str, Any], batch: list[Subtask], key: str = "oracles") -> dict[int, dict[str, Any]]:
    """Subtask index -> its reply item (under ``key``), matched by the item's ``subtask`` number, else by position."""
    items = obj.get(key)
    if not isinstance(items, list):
        items = [obj] if len(batch) == 1 else []  # a one-subtask batch may answer with a flat object
    wanted = {s.index for s in batch}
    out: dict[int, dict[str, Any]] = {}
    for pos, item in enumerate(i for i in items if isinstance(i, dict)):
        idx = resolve_index(item.get("subtask"), wanted)
        if idx is None and pos < len(batch):
            idx = batch[pos].index
        if idx is not None:
            out.setdefault(idx, item)
    return out


def yes(value: Any, reply: str = "") -> bool | None:
    """A yes/no field as a bool (None when absent); a bare "yes"/"no" in the reply text as a last resort."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        return value.strip().lower().startswith(("y", "true"))
    m = re.search(r"\b(yes|no)\b", reply or "", re.I)
    return None if not m else m.group(1).lower() == "yes"


def _log(traj: Trajectory, indices: range | list[int], budget: int) -> tuple[str, Any]:
    return render_steps(step_views(traj, list(indices)), budget)


async def synthesize(ledger: CaseLedger, system: str, header: str, batch: list[Subtask]) -> list[dict[str, Any]]:
    """The virtual oracles of ``batch`` from the task and the decomposition alone (one call, no step text)."""
    listing = "\n".join(f"{s.index}. '{s.name}' = steps {s.start}-{s.end}" for s in batch)
    ask = (
        f"The team split the task into these subtasks:\n{listing}\n"
        "Before looking at what the team did, write for EACH subtask what a correct execution must achieve: its "
        "goal, its preconditions, the key evidence it must produce, and acceptance criteria a checker can apply. "
        "Reply with JSON only:\n"
        '{"oracles": [{"subtask": <number>, "goal": "<short>", "preconditions": "<short>", "key_evidence": "<short>", '
        '"acceptance": "<criteria>"}]}'
    )
    item = contract("Oracle", subtask=one_of([s.index for s in batch]), **{k: text(ORACLE_FIELD_CHARS) for k in ORACLE_FIELDS})
    schema = schema_of(contract("OracleReply", oracles=many(item, len(batch), len(batch))))
    hints = {"attr_subtasks": [[s.index, s.start, s.end] for s in batch]}
    reply = await ledger.ask("oracle", lambda budget: (messages(system, f"{header}\n\n{ask}"), None), hints=hints,
                             schema=schema)
    items = oracle_items(ledger.parse("oracle", reply) or {}, batch)
    out = []
    for sub in batch:
        if sub.index not in items:
            ledger.note_fallback("oracle", f"missing_subtask_{sub.index}")
        raw = items.get(sub.index) or {}
        out.append({"subtask": sub.index, **{k: clip(str(raw.get(k, "")), 200) for k in ORACLE_FIELDS}})
    return out


def _oracle_text(oracle: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {oracle[k]}" for k in ORACLE_FIELDS if oracle.get(k)) or "(no oracle)"


async def judge(ledger: CaseLedger, traj: Trajectory, system: str, header: str, batch: list[Subtask],
                oracles: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Whether each subtask of ``batch`` met its oracle (one call, the batch's steps shown)."""
    listing = "\n".join(f"{s.index}. '{s.name}' = steps {s.start}-{s.end}. Oracle: {_oracle_text(oracles[s.index])}"
                        for s in batch)
    ask = (
        f"Subtasks and their oracles:\n{listing}\n"
        "For EACH subtask above, check its steps against its oracle: did they meet the acceptance criteria? "
        "Reply with JSON only:\n"
        '{"verdicts": [{"subtask": <number>, "reason": "<short>", "satisfied": "yes" or "no"}]}'
    )
    shown = range(batch[0].start, batch[-1].end + 1)

    def build(budget: int):
        log, report = _log(traj, shown, budget - ORACLE_FIXED_TOKENS - estimate_tokens(listing))
        return messages(system, f"{header}\n\nSteps:\n{log}\n\n{ask}"), report

    item = contract("Verdict", subtask=one_of([s.index for s in batch]), reason=text(60), satisfied=YesNo)
    schema = schema_of(contract("VerdictReply", verdicts=many(item, len(batch), len(batch))))
    hints = {"attr_subtasks": [[s.index, s.start, s.end] for s in batch]}
    reply = await ledger.ask("verdict", build, hints=hints, schema=schema)
    items = oracle_items(ledger.parse("verdict", reply) or {}, batch, "verdicts")
    out = {}
    for sub in batch:
        if sub.index not in items:
            ledger.note_fallback("verdict", f"missing_subtask_{sub.index}")
        raw = items.get(sub.index) or {}
        out[sub.index] = {"satisfied": yes(raw.get("satisfied")), "reason": clip(str(raw.get("reason", "")), 200)}
    return out


async def oracles(ledger: CaseLedger, traj: Trajectory, system: str, header: str,
                  subtasks: list[Subtask]) -> list[dict[str, Any]]:
    """Every subtask's oracle (synthesis calls) and verdict (verdict calls), in subtask order."""
    synthesized: dict[int, dict[str, Any]] = {}
    for batch in oracle_batches(subtasks, ledger.reply_tokens):
        synthesized |= {o["subtask"]: o for o in await synthesize(ledger, system, header, batch)}
    sizes = [estimate_tokens(render_steps(step_views(traj, sub.steps), 10**9)[0]) for sub in subtasks]
    budget = ledger.prompt_budget - estimate_tokens(system + header) - ORACLE_FIXED_TOKENS
    verdicts: dict[int, dict[str, Any]] = {}
    for batch in oracle_batches(subtasks, ledger.reply_tokens, sizes, budget, per_item=VERDICT_REPLY_TOKENS):
        verdicts |= await judge(ledger, traj, system, header, batch, synthesized)
    return [{**synthesized[s.index], **verdicts[s.index]} for s in subtasks]
