"""``learned``: the CPU attribution method, a step head and its own agent head, trained on labelled failures.

- Step head: the ``learned`` scorer's classifier
  (:func:`attribution.scorers.learned.fit_step_classifier`); the predicted
  step is its most likely step.
- Agent head: one row per distinct speaker of a trajectory
  (:func:`agent_features`: how likely its steps are by the step head, its
  share and first turn, its kind of speaker, its error cues), a random
  forest of "this agent is responsible". It is fitted on *out-of-fold* step
  probabilities of the training records (the step head's in-sample
  probabilities are over-confident, and the agent head must learn from the
  ones it will see).
- The answer (``agent_head``): ``"unorchestrated"`` (default) uses the head
  in teams without an orchestrator (the head's agent, then the most likely
  step of that agent), and in orchestrated teams (Magentic-One) the agent of
  the most likely step; ``"always"``/``"never"`` use the head everywhere or
  nowhere. Chosen by 5-fold cross-validation by question inside the
  development part of the Who&When dev split (86 records, seed-0 folds),
  never the held-out part: algorithm-generated agent 0.644 with the head vs
  0.508 from the top step, step 0.458 vs 0.339; hand-crafted (orchestrated)
  agent 0.481 vs 0.630, step 0.148 vs 0.259.

Trained with ``--method-option train_dir=DIR`` (a Who&When or runs
directory), never on the record it predicts: a target whose question (by
:func:`attribution.scorers.crossfit.group_key`) also occurs in ``train_dir``
is predicted by a model fitted without that question's fold (``folds`` folds
of the training groups), so evaluating on the training set itself is a
cross-fitted evaluation. No model calls (nfe 0, tokens 0); ``seconds`` is
the per-record prediction time, ``details["fit_seconds"]`` the one-off fits.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.scorers.crossfit import assign_folds, cross_fit, group_key
from attribution.scorers.features import is_tool_step, step_features
from attribution.scorers.learned import StepClassifier, fit_step_classifier
from attribution.sources.trajectory import Trajectory, normalize_agent
from descriptor.errors import UserError

AgentHead = Literal["unorchestrated", "always", "never"]

_ROLE_WORDS = {
    "orchestrator": ("orchestrator", "manager", "planner", "controller"),
    "surfer": ("surfer", "search", "web", "browser"),
    "verifier": ("verif", "valid", "critic", "review", "judge", "checker"),
    "expert": ("expert", "specialist"),
    "coder": ("coder", "assistant", "code", "python", "program"),
    "human": ("human", "user"),
}


def agent_features(t: Trajectory, step_probs: list[float]) -> tuple[list[str], np.ndarray, list[str]]:
    """``(agent keys, (n_agents, n_features) matrix, feature names)``: one row per distinct speaker."""
    X, names = step_features(t)
    col = {n: i for i, n in enumerate(names)}
    p = np.asarray(step_probs, dtype=float)
    total, top = float(p.sum()) or 1.0, float(p.max()) if len(p) else 1.0
    top_step = int(np.argmax(p)) if len(p) else 0
    keys = t.agent_keys
    own = {k: [s.index for s in t.steps if s.agent_key == k] for k in keys}
    best = {k: float(p[own[k]].max()) for k in keys}
    order = sorted(keys, key=lambda k: -best[k])
    n = max(1, t.n_steps)
    rows: list[dict[str, float]] = []
    for k in keys:
        idx = own[k]
        pk = p[idx]
        rows.append({
            "p_max": best[k], "p_max_rel": best[k] / (top or 1.0), "p_sum": float(pk.sum()) / total,
            "p_mean": float(pk.mean()), "owns_top": float(top_step in idx), "rank": float(order.index(k)),
            "p_first": float(pk[0]), "share": len(idx) / n, "first_u": (idx[0] + 0.5) / n,
            "last_u": (idx[-1] + 0.5) / n, "n_agents": float(len(keys)), "n_steps": float(t.n_steps),
            # a team led by an orchestrator (Magentic-One) fails differently from a chat of experts
            "team_orchestrated": float(any(any(w in x for w in _ROLE_WORDS["orchestrator"]) for x in keys)),
            "tool": float(all(is_tool_step(t.steps[i]) for i in idx)),
            **{f"is_{r}": float(any(w in k for w in ws)) for r, ws in _ROLE_WORDS.items()},
            **{f"sum_{c}": float(X[idx, col[c]].sum()) for c in
               ("cue_err", "cue_cannot", "cue_notfound", "cue_hedge", "cue_verify", "next_tool_fail", "first_error_cue")},
        })
    feat_names = list(rows[0]) if rows else []
    return keys, np.array([[r[f] for f in feat_names] for r in rows], dtype=float), feat_names


@dataclass(kw_only=True, slots=True)
class LearnedModel:
    """The two fitted heads."""

    steps: StepClassifier
    agents: Any
    """A fitted classifier over :func:`agent_features` rows."""
    n_train: int

    def predict(self, t: Trajectory, agent_head: AgentHead = "unorchestrated") -> Prediction:
        """Agent and step (see the module docstring); confidence: the step's share of the step probabilities."""
        probs = self.steps.probabilities(t)
        keys, X, names = agent_features(t, probs)
        p_agent = self.agents.predict_proba(X)[:, 1] if len(keys) > 1 else np.ones(1)
        orchestrated = bool(len(keys) and X[0, names.index("team_orchestrated")])
        use_head = agent_head == "always" or (agent_head == "unorchestrated" and not orchestrated)
        if use_head:
            key = keys[int(np.argmax(p_agent))]
            step = max((s.index for s in t.steps if s.agent_key == key), key=lambda i: (probs[i], -i))
        else:
            step = int(np.argmax(probs))
            key = t.steps[step].agent_key
        share = float(probs[step]) / (sum(probs) or 1.0)
        agent_conf = float(p_agent[keys.index(key)]) / (float(p_agent.sum()) or 1.0)
        agent = next(s.agent for s in t.steps if s.agent_key == key)
        return Prediction(agent=agent, step=step, confidence=min(1.0, max(0.0, share)), details={
            "agent_confidence": agent_conf, "agent_from": "head" if use_head else "top_step",
            "step_probabilities": [round(x, 4) for x in probs],
            "agent_probabilities": {k: round(float(x), 4) for k, x in zip(keys, p_agent)},
            "n_train": self.n_train})


def fit_learned(train: list[Trajectory], *, seed: int = 0, folds: int = 5) -> LearnedModel:
    """Both heads on the labelled ``train`` records (the agent head on out-of-fold step probabilities)."""
    labelled = [t for t in train if t.mistake_step is not None and t.n_steps > 0]
    if not labelled:
        raise UserError("learned: the training set has no labelled trajectory (mistake_step) to fit on")
    steps = fit_step_classifier(labelled, seed=seed)
    if len({group_key(t) for t in labelled}) >= 2:
        oof = cross_fit(labelled, [], folds=folds, seed=seed, fit=lambda tr: fit_step_classifier(tr, seed=seed),
                        score=lambda m, t: m.probabilities(t))
        oof_probs = {r.id: r.step_scores for r in oof}
    else:  # one question: nothing to hold out, so the in-sample probabilities it is
        oof_probs = {t.id: steps.probabilities(t) for t in labelled}
    xs, ys = [], []
    for t in labelled:
        keys, X, _ = agent_features(t, oof_probs[t.id])
        xs.append(X)
        ys.append([float(k == normalize_agent(t.mistake_agent)) for k in keys])
    y = np.concatenate(ys)
    agents = RandomForestClassifier(n_estimators=300, min_samples_leaf=3, random_state=seed, n_jobs=1)
    agents.fit(np.vstack(xs), y if y.any() and not y.all() else np.r_[y[:-1], 1.0 - y[-1]])
    return LearnedModel(steps=steps, agents=agents, n_train=len(labelled))


@dataclass(kw_only=True, slots=True)
class CrossFitted:
    """Models fitted on ``train``: the full one, and one per fold of its question groups (fitted when needed)."""

    train: list[Trajectory]
    seed: int
    folds: int
    fold_of: dict[str, int] = field(default_factory=dict)
    models: dict[int, LearnedModel] = field(default_factory=dict)
    fit_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.fold_of = assign_folds({group_key(t) for t in self.train}, self.folds, self.seed)

    def model_for(self, t: Trajectory) -> tuple[LearnedModel, int | None]:
        """A model that never saw ``t``'s question, and its fold (None: the full model)."""
        fold = self.fold_of.get(group_key(t))
        key = -1 if fold is None else fold
        if key not in self.models:
            start = time.perf_counter()
            tr = [x for x in self.train if fold is None or self.fold_of[group_key(x)] != fold]
            self.models[key] = fit_learned(tr, seed=self.seed, folds=self.folds)
            self.fit_seconds += time.perf_counter() - start
        return self.models[key], fold


def _load_train(train_dir: str) -> list[Trajectory]:
    from attribution.sources.loaders import load_train_dir

    if not Path(train_dir).exists():
        raise UserError(f"learned: train_dir {train_dir!r} does not exist (expected a Who&When or runs directory)")
    trajs = [t for t in load_train_dir(train_dir).trajectories if t.mistake_step is not None]
    if not trajs:
        raise UserError(f"learned: train_dir {train_dir!r} holds no labelled trajectory (mistake_step)")
    return trajs


@register_method("learned")
def learned_method(train_dir: str | None = None, folds: int = 5, agent_head: AgentHead = "unorchestrated") -> Method:
    """Step and agent heads trained on ``train_dir``; cross-fitted where the targets share its questions."""
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds: expected an integer >= 2, got {folds!r}")
    if agent_head not in ("unorchestrated", "always", "never"):
        raise ValueError(f"agent_head: expected unorchestrated, always or never, got {agent_head!r}")
    state: dict[str, CrossFitted] = {}
    gate = asyncio.Lock()

    async def run(trajectory: Trajectory, ctx: MethodContext) -> Prediction:
        if train_dir is None:
            raise UserError("method 'learned' is trained on labelled failures: pass --method-option train_dir=DIR")
        async with gate:  # one fit at a time; predictions are CPU-bound anyway
            if "fitted" not in state:
                state["fitted"] = CrossFitted(train=_load_train(train_dir), seed=ctx.seed, folds=folds)
            fitted = state["fitted"]
            before = fitted.fit_seconds
            model, fold = fitted.model_for(trajectory)
            start = time.perf_counter()
            pred = model.predict(trajectory, agent_head)
            seconds = time.perf_counter() - start
        return pred.model_copy(update={"seconds": seconds, "details": {
            **pred.details, "fold": fold, "fit_seconds": round(fitted.fit_seconds - before, 3)}})

    run.settings = {"train_dir": None if train_dir is None else str(Path(train_dir).resolve()),  # type: ignore[attr-defined]
                    "folds": folds, "agent_head": agent_head}
    return run
