"""Evaluation of conformal error attribution over random calibration/test splits.

Each split puts a random half (``n // 2``) of the labelled trajectories in
calibration and the rest in test. Per split: empirical coverage EC (share of
test trajectories whose set holds the decisive step), removal rate
RR = mean(1 - |C|/l) and NFE (scorer evaluations per trajectory). Results are
means and standard deviations over splits.

Everything is vectorised over splits: a trajectory's per-step thresholds do
not depend on the split, only q_hat does, so a set size is one
``searchsorted`` per trajectory over all splits' thresholds at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from attribution.conformal._aggregators import Aggregator, prefix_scores, suffix_scores
from attribution.conformal._calibrate import (
    AUTO_CANDIDATES,
    METHODS,
    auto_halves,
    coverage_guard,
    inner_splits,
    rank_for,
    step_thresholds,
)
from attribution.conformal._methods import base_methods, method_names
from attribution.conformal._paper import CRSVP_VARIANTS, crsvp_levels
from attribution.sources.scorefile import ScoreRecord, fingerprint, labelled, read_score_file
from descriptor.io import write_json_atomic
from descriptor.errors import UserError

TARGETS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))  # 0.50 .. 0.95


FILTRATIONS = ("lf", "rf", "twf")  # early-stopped scans; every other method scores all steps


@dataclass(kw_only=True, slots=True)
class Prepared:
    """Split-independent data of one deterministic threshold method (all but crsvp)."""

    method: str
    lengths: np.ndarray  # (N,) steps per trajectory
    cal_scores: np.ndarray  # (N,) h[e] per trajectory
    h_sorted: list[np.ndarray]  # per trajectory, sorted thresholds
    suffix_sorted: list[np.ndarray]  # lf scores sorted, for NFE
    prefix_sorted: list[np.ndarray]  # rf scores sorted, for NFE
    top1_is_error: np.ndarray  # (N,) argmax step == decisive step
    twf_fallback: bool = False


@dataclass(kw_only=True, slots=True)
class CrsvpPrepared:
    """Split-independent data of crsvp: per trajectory, the scores of its chain of tree nodes."""

    lengths: np.ndarray  # (N,)
    lower: list[np.ndarray]  # per trajectory, g(B_{j-1}) for j = 1..L
    upper: list[np.ndarray]  # per trajectory, g(B_j); the last is inf
    node_size: list[np.ndarray]  # per trajectory, |B_0| = 0, |B_1| = 1, ..., |B_L| = l
    err_pos: np.ndarray  # (N,) j - 1 where B_j is the first node holding e


@dataclass(kw_only=True, slots=True)
class SplitMetrics:
    """Per-split figures, each of shape (R,)."""

    ec: np.ndarray
    rr: np.ndarray
    nfe: np.ndarray
    q_hat: np.ndarray
    empty_rate: np.ndarray
    fallback_rate: np.ndarray
    choice: np.ndarray | None = None  # auto: chosen method per split


def prepare(records: Sequence[ScoreRecord], method: str, agg: Aggregator, twf_fallback: bool = False) -> Prepared:
    """Thresholds of every (labelled) record for a deterministic threshold method."""
    hs, sufs, pres = [], [], []
    for r in records:
        hs.append(step_thresholds(r.step_scores, method, agg))
        scan = method in FILTRATIONS
        sufs.append(np.sort(suffix_scores(r.step_scores, agg)) if scan else np.empty(0))
        pres.append(np.sort(prefix_scores(r.step_scores, agg)) if scan else np.empty(0))
    return Prepared(
        method=method,
        lengths=np.array([r.n_steps for r in records]),
        cal_scores=np.array([h[r.mistake_step] for h, r in zip(hs, records)]),
        h_sorted=[np.sort(h) for h in hs],
        suffix_sorted=sufs,
        prefix_sorted=pres,
        top1_is_error=np.array([int(np.argmax(r.step_scores)) == r.mistake_step for r in records]),
        twf_fallback=twf_fallback,
    )


def prepare_crsvp(records: Sequence[ScoreRecord], agg: Aggregator, variant: str = "paper") -> CrsvpPrepared:
    """Chains of tree nodes of every (labelled) record (``variant``: ``paper`` or ``released``)."""
    chains = [crsvp_levels(r.step_scores, agg, variant) for r in records]
    return CrsvpPrepared(
        lengths=np.array([r.n_steps for r in records]),
        lower=[lo for _, lo, _ in chains],
        upper=[up for _, _, up in chains],
        node_size=[np.array([0] + [hi - lo + 1 for lo, hi in path]) for path, _, _ in chains],
        err_pos=np.array([next(j for j, (lo, hi) in enumerate(path) if lo <= r.mistake_step <= hi)
                          for (path, _, _), r in zip(chains, records)]),
    )


def draw_splits(n: int, splits: int, seed: int) -> np.ndarray:
    """(splits, n) random permutations; the first ``n // 2`` columns are calibration."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((splits, n)), axis=1)


def split_quantiles(cal: np.ndarray, alpha: float) -> np.ndarray:
    """q_hat per row of a (R, n_cal) matrix of calibration scores."""
    k = rank_for(cal.shape[1], alpha)
    if k > cal.shape[1]:
        return np.full(cal.shape[0], np.inf)
    return np.partition(cal, k - 1, axis=1)[:, k - 1]


def _count_le(sorted_rows: list[np.ndarray], q: np.ndarray) -> np.ndarray:
    """(N, Q): how many entries of each sorted row are <= each threshold."""
    return np.stack([np.searchsorted(row, q, side="right") for row in sorted_rows])


def threshold_outcomes(p: Prepared, q: np.ndarray) -> dict[str, np.ndarray]:
    """Every record's set at every threshold in ``q``: (N, Q) arrays."""
    size = _count_le(p.h_sorted, q)
    covered = p.cal_scores[:, None] <= q[None, :]
    lengths = np.broadcast_to(p.lengths[:, None], size.shape)
    fallback = np.zeros(size.shape, dtype=bool)
    if p.method == "twf" and p.twf_fallback:
        fallback = size == 0
        size = np.where(fallback, 1, size)
        covered = covered | (fallback & p.top1_is_error[:, None])
    if p.method not in FILTRATIONS:
        nfe = lengths.copy()
    else:  # vectorised filtration_nfe: early-stopped scans, see conformal.filtration_nfe
        j_star = lengths - _count_le(p.suffix_sorted, q)
        k_star = _count_le(p.prefix_sorted, q) - 1
        lf_lo, rf_hi = np.maximum(j_star - 1, 1), np.minimum(k_star + 1, lengths - 2)
        lf_count, rf_count = np.maximum(0, lengths - lf_lo), np.maximum(0, rf_hi + 1)
        nfe = {"lf": lf_count, "rf": rf_count}.get(
            p.method, lf_count + rf_count - np.maximum(0, rf_hi - lf_lo + 1)
        )
        nfe = np.where(fallback, lengths, nfe)
    nfe = np.where(np.isinf(q)[None, :], 0, nfe)
    return {"size": size, "covered": covered, "nfe": nfe, "fallback": fallback}


def _on_test(mat: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Pick (R, n_test) entries of an (N, R) matrix: split r's test records."""
    return mat.T[np.arange(test.shape[0])[:, None], test]


def _summarise(out: dict[str, np.ndarray], lengths: np.ndarray, test: np.ndarray, q: np.ndarray) -> SplitMetrics:
    size, cov, nfe = (_on_test(out[k], test) for k in ("size", "covered", "nfe"))
    return SplitMetrics(
        ec=cov.mean(axis=1), rr=(1.0 - size / lengths[test]).mean(axis=1), nfe=nfe.mean(axis=1),
        q_hat=q, empty_rate=(size == 0).mean(axis=1),
        fallback_rate=_on_test(out["fallback"], test).mean(axis=1),
    )


def eval_threshold(p: Prepared, perms: np.ndarray, alpha: float) -> SplitMetrics:
    """Split metrics of a deterministic threshold method (all but crsvp and auto)."""
    n_cal = perms.shape[1] // 2
    q = split_quantiles(p.cal_scores[perms[:, :n_cal]], alpha)
    return _summarise(threshold_outcomes(p, q), p.lengths, perms[:, n_cal:], q)


def auto_choices(preps: dict[str, Prepared], cal_idx: np.ndarray, alpha: float, seed: int) -> np.ndarray:
    """auto's choice per split (index into AUTO_CANDIDATES) from the split's selection
    records ``cal_idx`` (R, n_sel) alone: conformal.choose_method, vectorised over splits."""
    n_split, n_cal = cal_idx.shape
    if n_cal < 3:
        return np.zeros(n_split, dtype=int)
    inner = inner_splits(n_cal, seed)
    n_t = n_cal // 3
    in_test = cal_idx[:, inner[:, :n_t]]  # (R, J, n_t) record indices
    in_cal = cal_idx[:, inner[:, n_t:]]
    n_inner = inner.shape[0]
    rates, cover = [], []
    for m in AUTO_CANDIDATES:
        p = preps[m]
        q = split_quantiles(p.cal_scores[in_cal].reshape(n_split * n_inner, -1), alpha)  # (R*J,)
        size = _count_le(p.h_sorted, q)  # (N, R*J)
        flat_test = in_test.reshape(n_split * n_inner, n_t)
        size_t = size[flat_test, np.arange(n_split * n_inner)[:, None]]
        rr = (1.0 - size_t / p.lengths[flat_test]).mean(axis=1).reshape(n_split, n_inner).mean(axis=1)
        ec = (p.cal_scores[flat_test] <= q[:, None]).mean(axis=1).reshape(n_split, n_inner).mean(axis=1)
        # Same rounding as conformal.choose_method, so equal figures tie identically.
        rates.append(np.round(rr, 12))
        cover.append(np.round(ec, 12))
    rates_a, cover_a = np.stack(rates), np.stack(cover)
    eligible = cover_a >= coverage_guard(alpha, n_cal)
    best = np.argmax(np.where(eligible, rates_a, -np.inf), axis=0)  # first max = tie order
    return np.where(eligible.any(axis=0), best, np.argmax(cover_a, axis=0))


def eval_auto(preps: dict[str, Prepared], perms: np.ndarray, alpha: float, seed: int) -> SplitMetrics:
    """Split metrics of auto: per split, the candidate chosen by inner cross-validation on the
    selection half of the split's calibration records, q_hat from the other half (conformal.fit)."""
    n_cal = perms.shape[1] // 2
    sel_idx, q_idx = auto_halves(n_cal, seed)
    choice = auto_choices(preps, perms[:, :n_cal][:, sel_idx], alpha, seed)
    outs, qs = [], []
    for m in AUTO_CANDIDATES:
        q = split_quantiles(preps[m].cal_scores[perms[:, :n_cal][:, q_idx]], alpha)
        outs.append(threshold_outcomes(preps[m], q))
        qs.append(q)
    cols = np.arange(perms.shape[0])
    picked = {k: np.stack([o[k] for o in outs])[choice, :, cols].T for k in outs[0]}
    res = _summarise(picked, preps[AUTO_CANDIDATES[0]].lengths, perms[:, n_cal:], np.stack(qs)[choice, cols])
    res.choice = np.array(AUTO_CANDIDATES)[choice]
    return res


def eval_crsvp(p: CrsvpPrepared, perms: np.ndarray, alpha: float, u: np.ndarray) -> SplitMetrics:
    """Split metrics of crsvp; ``u`` is the (R, N) matrix of interpolation draws in (0, 1]."""
    n_split, n_rec = u.shape
    n_cal = perms.shape[1] // 2
    vs, scores = [], np.empty((n_split, n_rec))
    for t in range(n_rec):  # per trajectory: (R, l) interpolated chain scores
        lo, hi = p.lower[t], p.upper[t]
        with np.errstate(invalid="ignore"):
            v = np.where(np.isinf(hi), np.inf, lo + u[:, t, None] * (hi - lo))
        vs.append(v)
        scores[:, t] = v[:, p.err_pos[t]]
    q = split_quantiles(scores[np.arange(n_split)[:, None], perms[:, :n_cal]], alpha)
    # v is monotone in j, so the set is the node B_J with J = #{j : v_j <= q}
    size = np.stack([p.node_size[t][(v <= q[:, None]).sum(axis=1)] for t, v in enumerate(vs)])  # (N, R)
    out = {
        "size": size, "covered": (scores <= q[:, None]).T,
        "nfe": np.where(np.isinf(q)[None, :], 0, p.lengths[:, None]), "fallback": np.zeros(size.shape, bool),
    }
    return _summarise(out, p.lengths, perms[:, n_cal:], q)


class Evaluator:
    """Precomputes every method's thresholds once; evaluates any method at any alpha."""

    def __init__(
        self, records: Sequence[ScoreRecord], agg: Aggregator, splits: int, seed: int, twf_fallback: bool = False
    ) -> None:
        self.records, self.n_skipped = labelled(list(records))
        if len(self.records) < 2:
            raise UserError(
                f"need at least 2 records with a mistake_step to split, got {len(self.records)} "
                f"({self.n_skipped} skipped for a null mistake_step)"
            )
        if splits < 1:
            raise UserError(f"splits: expected an integer >= 1, got {splits}")
        self.agg, self.splits, self.seed, self.twf_fallback = agg, splits, seed, twf_fallback
        self.perms = draw_splits(len(self.records), splits, seed)
        self.u = 1.0 - np.random.default_rng([seed, 1]).random((splits, len(self.records)))
        self._preps: dict[str, Prepared] = {}
        self._crsvp: dict[str, CrsvpPrepared] = {}

    def _prep(self, method: str) -> Prepared:
        if method not in self._preps:
            self._preps[method] = prepare(self.records, method, self.agg, self.twf_fallback)
        return self._preps[method]

    def run(self, method: str, alpha: float) -> SplitMetrics:
        """Per-split metrics of ``method`` at miscoverage ``alpha``."""
        if method in CRSVP_VARIANTS:
            if method not in self._crsvp:
                self._crsvp[method] = prepare_crsvp(self.records, self.agg, CRSVP_VARIANTS[method])
            return eval_crsvp(self._crsvp[method], self.perms, alpha, self.u)
        if method == "auto":
            return eval_auto({m: self._prep(m) for m in AUTO_CANDIDATES}, self.perms, alpha, self.seed)
        if method not in base_methods():
            raise UserError(f"method: expected one of {', '.join(method_names())}, got {method!r}")
        return eval_threshold(self._prep(method), self.perms, alpha)


def inf_json(x: float) -> float | str:
    """JSON form of a possibly infinite number: ∞ is the string "inf"."""
    return "inf" if math.isinf(x) else float(x)


def summarise(m: SplitMetrics, method: str, alpha: float, ev: Evaluator) -> dict:
    """``results.json`` content for one method."""
    n = len(ev.records)
    n_cal = n // 2
    res = {
        "method": method, "alpha": alpha, "splits": ev.splits,
        "ec_mean": float(m.ec.mean()), "ec_std": float(m.ec.std()),
        "rr_mean": float(m.rr.mean()), "rr_std": float(m.rr.std()),
        "nfe_mean": float(m.nfe.mean()), "nfe_std": float(m.nfe.std()),
        "n": n, "n_skipped_null_mistake": ev.n_skipped, "n_cal": n_cal, "n_test": n - n_cal,
        "target_coverage": 1 - alpha, "coverage_upper_bound": 1 - alpha + 1 / (n_cal + 1),
        "q_hat_median": inf_json(float(np.median(m.q_hat))),
        "q_hat_inf_rate": float(np.isinf(m.q_hat).mean()),
        "empty_set_rate": float(m.empty_rate.mean()), "fallback_rate": float(m.fallback_rate.mean()),
        "mean_steps": float(np.mean([r.n_steps for r in ev.records])),
        "aggregator": ev.agg.kind, "lam": ev.agg.lam, "beta": ev.agg.beta, "seed": ev.seed,
        "twf_fallback": ev.twf_fallback,
    }
    if m.choice is not None:
        names, counts = np.unique(m.choice, return_counts=True)
        res["auto_choice"] = {str(k): int(c) for k, c in zip(names, counts)}
        n_sel = len(auto_halves(n_cal, ev.seed)[0])
        res["n_selection"] = n_sel  # chooses the method; the other n_cal - n_selection set q_hat
        res["coverage_upper_bound"] = 1 - alpha + 1 / (n_cal - n_sel + 1)
    return res


def coverage_curve(ev: Evaluator, methods: Sequence[str] = METHODS, targets: Sequence[float] = TARGETS) -> dict:
    """EC and RR (mean, std) of each method at each target coverage 1 - alpha."""
    curve: dict = {"targets": list(targets)}
    for method in methods:
        ms = [ev.run(method, round(1 - t, 10)) for t in targets]
        curve[method] = {
            "ec_mean": [float(m.ec.mean()) for m in ms], "ec_std": [float(m.ec.std()) for m in ms],
            "rr_mean": [float(m.rr.mean()) for m in ms], "rr_std": [float(m.rr.std()) for m in ms],
        }
    return curve


def synthetic_records(n: int, seed: int, min_len: int = 3, max_len: int = 30, noise: float = 0.25) -> list[ScoreRecord]:
    """Score records with informative-but-noisy step scores around a known error.

    The decisive step sits at relative position ~ Beta(2, 3) (early-leaning,
    like Who&When); scores are a bump of width 1-3 steps at it plus uniform
    noise of amplitude ``noise`` and an occasional decoy bump elsewhere.
    """
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        ell = int(rng.integers(min_len, max_len + 1))
        e = min(int(rng.beta(2, 3) * ell), ell - 1)
        idx = np.arange(ell)
        s = 0.7 * np.exp(-np.abs(idx - e) / rng.uniform(1, 3)) + noise * rng.random(ell)
        if rng.random() < 0.3:  # a decoy the scorer finds as suspicious as the real error
            s += 0.6 * np.exp(-np.abs(idx - rng.integers(ell)) / 1.5)
        s = np.clip(s, 0.0, 1.0)
        out.append(ScoreRecord(id=f"syn-{t}", n_steps=ell, step_scores=s.tolist(), mistake_step=e))
    return out


def run_conformal(
    scores_path: str | Path, method: str, alpha: float, splits: int, seed: int, agg: Aggregator,
    out_dir: str | Path, plots: bool = True, twf_fallback: bool = False,
) -> dict:
    """The ``conformal`` command: results.json, coverage_curve.json and PNG plots in ``out_dir``."""
    records = read_score_file(scores_path)
    ev = Evaluator(records, agg, splits, seed, twf_fallback)
    res = summarise(ev.run(method, alpha), method, alpha, ev)
    res.update(scores=str(scores_path), fingerprint=fingerprint(scores_path))
    out_dir = Path(out_dir)
    if plots:
        curve = coverage_curve(ev)
        write_json_atomic(out_dir / "coverage_curve.json", curve)
        plot_coverage(curve, ev, out_dir / "coverage_vs_target.png")
        plot_error_positions(ev.records, out_dir / "error_positions.png")
    write_json_atomic(out_dir / "results.json", res)
    return res


def plot_coverage(curve: dict, ev: Evaluator, path: str | Path) -> None:
    """PNG: EC (± std over splits) and RR against target coverage, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = np.array(curve["targets"])
    n_cal = len(ev.records) // 2
    fig, (ax_ec, ax_rr) = plt.subplots(1, 2, figsize=(11, 4.5))
    for method in METHODS:
        c = curve[method]
        ax_ec.errorbar(targets, c["ec_mean"], yerr=c["ec_std"], marker="o", ms=3, capsize=2, label=method)
        ax_rr.plot(targets, c["rr_mean"], marker="o", ms=3, label=method)
    ax_ec.plot(targets, targets, "k--", lw=1, label="target")
    ax_ec.plot(targets, targets + 1 / (n_cal + 1), "k:", lw=1, label="target + 1/(n_cal+1)")
    ax_ec.set(xlabel="target coverage 1 - alpha", ylabel="empirical coverage EC", title="Coverage")
    ax_rr.set(xlabel="target coverage 1 - alpha", ylabel="removal rate RR", title="Removal rate")
    ax_ec.legend(fontsize=8)
    ax_rr.legend(fontsize=8)
    fig.suptitle(f"{len(ev.records)} trajectories, {ev.splits} splits, aggregator {ev.agg.kind}")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_error_positions(records: Sequence[ScoreRecord], path: str | Path) -> None:
    """PNG: histogram of decisive-error positions, absolute step and relative e / l."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([r.mistake_step for r in records])
    rel = np.array([r.mistake_step / r.n_steps for r in records])
    fig, (ax_abs, ax_rel) = plt.subplots(1, 2, figsize=(10, 4))
    ax_abs.hist(steps, bins=np.arange(steps.max() + 2) - 0.5)
    ax_abs.set(xlabel="decisive error step (0-indexed)", ylabel="trajectories", title="Absolute position")
    ax_rel.hist(rel, bins=np.linspace(0, 1, 11))
    ax_rel.set(xlabel="relative position step / n_steps", ylabel="trajectories", title="Relative position")
    fig.suptitle(f"Decisive-error positions of {len(records)} labelled trajectories")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
