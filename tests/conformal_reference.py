"""Direct implementations of the conformal definitions, independent of attribution.conformal.

Written from the definitions (the issues and the module docstrings): families
are enumerated explicitly, "longest suffix/prefix with g <= q" is searched
for literally, the crsvp tree is built by pairing adjacent nodes bottom-up,
the new families use exact rational arithmetic, and NFE comes from
simulating the scan with a counting oracle.
"""

from __future__ import annotations

import math
from fractions import Fraction

from attribution.conformal import INF
from attribution.sources.scorefile import ScoreRecord

# --- the paper's methods ------------------------------------------------------------


def ref_g(s, seg, agg):
    """g over the index list ``seg`` with g(empty) = 0 and g(whole) = inf."""
    n = len(s)
    if not seg:
        return 0.0
    if len(seg) == n:
        return INF
    vals = [s[i] for i in seg]
    if agg.kind == "sum":
        return math.fsum(vals) / n
    if agg.kind == "max":
        return max(vals) + agg.lam * (max(seg) - min(seg)) / n
    # the normalised LogSumExp (the paper's with the trajectory length n, the released code's with the segment's;
    # the paper's print subtracts log n outside the 1/beta), shifted by its largest term as the implementation is
    m = n if agg.kind in ("lse", "lse_inside") else len(vals)
    xs = [agg.beta * m * v for v in vals]
    lse = max(xs) + math.log(math.fsum(math.exp(x - max(xs)) for x in xs))
    return lse / agg.beta - math.log(m) if agg.kind == "lse" else (lse - math.log(m)) / agg.beta


def ref_family(method, n):
    if method == "lf":  # suffixes, longest first, ending with the empty set
        return [list(range(j, n)) for j in range(n + 1)]
    return [list(range(0, k + 1)) for k in range(n - 1, -2, -1)]  # rf: prefixes


def ref_longest(s, method, q, agg):
    """Longest member of the lf/rf family with g <= q, or the empty set."""
    for seg in ref_family(method, len(s)):
        if ref_g(s, seg, agg) <= q:
            return set(seg)
    return set()


def ref_smallest_score(s, method, e, agg):
    """g of the smallest member of the lf/rf family that contains e."""
    return ref_g(s, min((seg for seg in ref_family(method, len(s)) if e in seg), key=len), agg)


def ref_tree_nodes(n):
    """Every node of the crsvp tree: leaves, then adjacent nodes paired level by level
    (an odd last node carried up alone), as the authors' released code builds it."""
    level = [(i, i) for i in range(n)]
    nodes = list(level)
    while len(level) > 1:
        level = [(level[k][0], level[min(k + 1, len(level) - 1)][1]) for k in range(0, len(level), 2)]
        nodes += level
    return set(nodes)


def ref_halving_nodes(n):
    """Every node of the paper's crsvp tree: the root [0, n-1], each node [lo, hi] halved at (lo + hi) // 2."""
    nodes, todo = set(), [(0, n - 1)]
    while todo:
        lo, hi = todo.pop()
        nodes.add((lo, hi))
        if lo < hi:
            mid = (lo + hi) // 2
            todo += [(lo, mid), (mid + 1, hi)]
    return nodes


def ref_crsvp_levels(s, agg, u, method="crsvp"):
    """crsvp's chain: the tree nodes holding the top-1 leaf, smallest first.
    Returns the sets B_0 = ∅, B_1..B_L and the scores v_1..v_L (``crsvp``: the paper's tree, v_1 = g(B_1);
    ``crsvp_released``: the released code's tree, v_1 interpolated from g(∅) = 0)."""
    top = max(range(len(s)), key=lambda i: (s[i], -i))  # first argmax
    nodes = ref_halving_nodes(len(s)) if method == "crsvp" else ref_tree_nodes(len(s))
    path = sorted({nd for nd in nodes if nd[0] <= top <= nd[1]}, key=lambda nd: nd[1] - nd[0])
    sets = [set(range(lo, hi + 1)) for lo, hi in path]
    g = [0.0] + [ref_g(s, sorted(a), agg) for a in sets]
    v = [INF if g[k] == INF else g[k - 1] + u * (g[k] - g[k - 1]) for k in range(1, len(g))]
    if method == "crsvp":
        v[0] = g[1]
    return [set()] + sets, v


def ref_score(s, e, method, agg, u):
    if method == "vcp":
        return 1.0 - s[e]
    if method in ("lf", "rf"):
        return ref_smallest_score(s, method, e, agg)
    if method == "twf":
        return max(ref_smallest_score(s, "lf", e, agg), ref_smallest_score(s, "rf", e, agg))
    if method in NEW:
        return float(ref_new_h(s, method)[e])
    sets, v = ref_crsvp_levels(s, agg, u, method)
    return v[min(k for k in range(1, len(sets)) if e in sets[k]) - 1]


def ref_scan(s, method, q, agg):
    """Early-stopped lf/rf scan with a counting oracle: (set, steps whose score was asked)."""
    n, asked = len(s), set()
    order = range(n - 1, -1, -1) if method == "lf" else range(n)
    chosen: list[int] = []
    for i in order:
        seg = sorted(chosen + [i])
        if len(seg) < n:  # the whole trajectory scores inf without asking the scorer
            asked.update(seg)
        if ref_g(s, seg, agg) > q:
            break
        chosen = seg
    return set(chosen), asked


def ref_set(s, method, q, agg, u, fallback=False):
    """(set, nfe) straight from the definitions."""
    n = len(s)
    if method == "vcp":
        return {i for i in range(n) if 1.0 - s[i] <= q}, 0 if q == INF else n
    if method in NEW:
        h = ref_new_h(s, method)
        return {i for i in range(n) if h[i] <= q}, 0 if q == INF else n
    if method in ("crsvp", "crsvp_released"):
        sets, v = ref_crsvp_levels(s, agg, u, method)
        k = max([0] + [k for k in range(1, len(sets)) if v[k - 1] <= q])
        return sets[k], 0 if q == INF else n
    if method in ("lf", "rf"):
        chosen, asked = ref_scan(s, method, q, agg)
        assert chosen == ref_longest(s, method, q, agg)
        return chosen, 0 if q == INF else len(asked)
    (lf_set, lf_asked), (rf_set, rf_asked) = ref_scan(s, "lf", q, agg), ref_scan(s, "rf", q, agg)
    inter = lf_set & rf_set
    if not inter and fallback:
        return {max(range(n), key=lambda i: (s[i], -i))}, 0 if q == INF else n
    return inter, 0 if q == INF else len(lf_asked | rf_asked)


def ref_quantile(scores, alpha):
    n = len(scores)
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    return INF if k > n else sorted(scores)[k - 1]


def rec(i, scores, e):
    return ScoreRecord(id=f"r{i}", n_steps=len(scores), step_scores=list(scores), mistake_step=e)


# --- the contiguous families beyond the paper (exact rationals) ----------------------

NEW = ("trim", "grow", "band")


def ref_dist(s):
    """p_i = s_i / Σ s as Fractions (uniform when Σ s = 0)."""
    fr = [Fraction(x) for x in s]
    total = sum(fr)
    return [Fraction(1, len(s))] * len(s) if total == 0 else [x / total for x in fr]


def ref_trim_mu(s):
    """Peeling: each stage takes the lowest mean over every (prefix a, suffix b) trim of
    what is left, then cuts the longest prefix and the longest suffix of that mean, or
    everything left when those two overlap."""
    p = ref_dist(s)
    n = len(p)
    mu = [None] * n
    lo, hi = 0, n - 1
    while lo <= hi:
        m = hi - lo + 1
        means = {}
        for a in range(m + 1):
            for b in range(m + 1 - a):
                if a + b:
                    block = p[lo : lo + a] + p[hi - b + 1 : hi + 1]
                    means[a, b] = sum(block) / len(block)
        low = min(means.values())
        a = max([k for k in range(1, m + 1) if means[k, 0] == low], default=0)
        b = max([k for k in range(1, m + 1) if means[0, k] == low], default=0)
        if a + b > m:
            a, b = m, 0
        for i in [*range(lo, lo + a), *range(hi - b + 1, hi + 1)]:
            mu[i] = low * n
        lo, hi = lo + a, hi - b
    return mu


def ref_new_h(s, method):
    """h of trim, grow or band, as floats from exact rationals."""
    p = ref_dist(s)
    n = len(p)
    if method == "trim":
        return [float(1 / (1 + m)) for m in ref_trim_mu(s)]
    if method == "band":
        return [float(min(1, 2 * abs(sum(p[:i]) + p[i] / 2 - Fraction(1, 2)))) for i in range(n)]
    top = max(range(n), key=lambda i: (p[i], -i))
    inside, h = {top}, [None] * n
    h[top] = float(p[top])
    while len(inside) < n:
        lo, hi = min(inside), max(inside)
        left, right = sum(p[:lo]), sum(p[hi + 1 :])
        nxt = lo - 1 if lo > 0 and (left >= right or hi == n - 1) else hi + 1
        inside.add(nxt)
        h[nxt] = float(min(1, sum(p[i] for i in inside)))
    return h
