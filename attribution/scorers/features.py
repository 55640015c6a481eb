"""Per-step features for the ``learned`` scorer: position, speaker, lexical cues, neighbours.

Every feature is computed from the trajectory alone (no ground truth, no
label), so the same function serves training and scoring. Feature names are
stable; :func:`step_features` returns one row per step in step order.
"""

from __future__ import annotations

import math
import re

import numpy as np

from attribution.sources.trajectory import Step, Trajectory

_ERROR_RE = re.compile(r"\b(error|errors|failed|failure|fail|exception|invalid|incorrect|wrong|mistake)\b", re.I)
_CANNOT_RE = re.compile(r"\b(cannot|can't|can not|unable|not able|couldn't|could not|unfortunately|sorry)\b", re.I)
_NOTFOUND_RE = re.compile(r"\b(not found|no results?|does not exist|doesn't exist|not available|404)\b", re.I)
_TRACEBACK_RE = re.compile(r"traceback \(most recent call last\)|\w+Error:", re.I)
_EXIT_FAIL_RE = re.compile(r"exitcode:\s*[1-9]|execution failed", re.I)
_EXIT_OK_RE = re.compile(r"exitcode:\s*0", re.I)
_HEDGE_RE = re.compile(
    r"\b(assume|assuming|assumption|likely|probably|approximately|approximate|estimate|might|perhaps|"
    r"hypothetical|simulat\w*|example|placeholder|mock|guess|seems?|appears?)\b", re.I)
_VERIFY_RE = re.compile(r"\b(verify|verified|verification|confirm|confirmed|check|checked|validate|correct)\b", re.I)
_PLAN_RE = re.compile(r"\b(plan|step \d|next step|first,|let's|we need to|i will|i'll)\b", re.I)
_TERMINATE_RE = re.compile(r"\bTERMINATE\b")
_CODE_RE = re.compile(r"```")
_NUMBER_RE = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_URL_RE = re.compile(r"https?://\S+")
_WORD_RE = re.compile(r"[a-z0-9]+")
_TOOL_SPEAKERS = ("terminal", "computer", "tool", "executor", "code_runner")


def _cues(text: str) -> dict[str, float]:
    low = text[:20000]
    return {
        "err": min(5, len(_ERROR_RE.findall(low))),
        "cannot": min(5, len(_CANNOT_RE.findall(low))),
        "notfound": min(5, len(_NOTFOUND_RE.findall(low))),
        "traceback": float(bool(_TRACEBACK_RE.search(low))),
        "exit_fail": float(bool(_EXIT_FAIL_RE.search(low))),
        "exit_ok": float(bool(_EXIT_OK_RE.search(low))),
        "hedge": min(8, len(_HEDGE_RE.findall(low))),
        "verify": min(8, len(_VERIFY_RE.findall(low))),
        "plan": min(8, len(_PLAN_RE.findall(low))),
        "terminate": float(bool(_TERMINATE_RE.search(low))),
        "code": min(6, len(_CODE_RE.findall(low)) // 2),
        "numbers": math.log1p(len(_NUMBER_RE.findall(low))),
        "urls": min(5, len(_URL_RE.findall(low))),
        "log_len": math.log1p(len(text)),
    }


def is_tool_step(step: Step) -> bool:
    """A tool's output (code execution, terminal, tool result), not an agent's decision."""
    key = step.agent_key
    return step.kind == "tool_result" or any(k in key for k in _TOOL_SPEAKERS)


def _speaker(step: Step) -> dict[str, float]:
    key, role = step.agent_key, step.role.lower()
    return {
        "tool": float(is_tool_step(step)),
        "human": float(key in ("human", "user") or role == "human"),
        "orchestrator": float(any(k in key for k in ("orchestrator", "manager", "planner", "controller"))),
        "surfer": float("surfer" in key or "search" in key or "web" in key),
        "verifier": float(any(k in key for k in ("verif", "valid", "critic", "review", "judge"))),
        "role_thought": float(role == "thought"),
        "role_handoff": float(role.startswith("->")),
        "role_termination": float("termination" in role),
        "role_assistant": float(role == "assistant"),
    }


def _overlap(a: str, b: str) -> float:
    wa, wb = set(_WORD_RE.findall(a.lower()[:5000])), set(_WORD_RE.findall(b.lower()[:5000]))
    return len(wa & wb) / max(1, len(wa | wb))


def step_features(t: Trajectory) -> tuple[np.ndarray, list[str]]:
    """``(n_steps, n_features)`` matrix and the feature names."""
    n = t.n_steps
    cues = [_cues(s.content) for s in t.steps]
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    for s in t.steps:
        counts[s.agent_key] = counts.get(s.agent_key, 0) + 1
    n_agents = len(counts)
    rows: list[dict[str, float]] = []
    errors_before = 0.0
    decisions_before = 0
    for i, s in enumerate(t.steps):
        k = seen.get(s.agent_key, 0)
        seen[s.agent_key] = k + 1
        prev = t.steps[i - 1] if i else None
        nxt_c = cues[i + 1] if i + 1 < n else None
        nxt_tool_fail = float(nxt_c is not None and (nxt_c["exit_fail"] or nxt_c["traceback"]) > 0)
        err_here = cues[i]["err"] + cues[i]["cannot"] + cues[i]["notfound"] + cues[i]["exit_fail"]
        row = {
            "u": (i + 0.5) / n, "index": float(i), "log_index": math.log1p(i), "n_steps": float(n),
            "log_n": math.log(n), "first": float(i == 0), "last": float(i == n - 1),
            "from_end": math.log1p(n - 1 - i), "agent_turn": float(k), "agent_first_turn": float(k == 0),
            "agent_share": counts[s.agent_key] / n, "n_agents": float(n_agents),
            "speaker_change": float(prev is not None and prev.agent_key != s.agent_key),
            "decision_index": float(decisions_before), "first_decision": float(decisions_before == 0),
            "errors_before": math.log1p(errors_before), "first_error_cue": float(err_here > 0 and errors_before == 0),
            "next_tool_fail": nxt_tool_fail, "query_overlap": _overlap(s.content, t.query),
        }
        row.update(_speaker(s))
        row.update({f"cue_{k2}": v for k2, v in cues[i].items()})
        if nxt_c is not None:
            row.update({f"next_{k2}": nxt_c[k2] for k2 in ("err", "cannot", "notfound", "exit_ok", "hedge")})
        else:
            row.update({f"next_{k2}": 0.0 for k2 in ("err", "cannot", "notfound", "exit_ok", "hedge")})
        pc = cues[i - 1] if i else None
        row.update({f"prev_{k2}": (pc[k2] if pc else 0.0) for k2 in ("err", "cannot", "exit_fail", "hedge")})
        rows.append(row)
        errors_before += err_here
        if not is_tool_step(s) and row["human"] == 0.0:
            decisions_before += 1
    names = list(rows[0]) if rows else []
    return np.array([[r[k] for k in names] for r in rows], dtype=float), names
