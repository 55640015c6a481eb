"""Sample-size planning for the report's test: a paired comparison over tasks of two systems' success rates.

The report compares a MAS with the SAS by the mean over tasks of the per-task difference in success rate
(bootstrap interval, sign test). Its power is planned here with the normal approximation of that paired test
(two-sided, level ``alpha``): a task's difference has variance

    sigma^2 = (p_b (1 - p_b) + p_m (1 - p_m)) * (icc + (1 - icc) / R)

for baseline rate p_b, MAS rate p_m = p_b + effect, R runs per task and ``icc`` the share of a run's variance that
is the task's own (1: a task is always solved or never, more runs do not help; 0: runs of one task are as
different as runs of different tasks). Then n = ((z_{1-alpha/2} + z_power) * sigma / effect)^2 tasks, and the
smallest detectable effect of n tasks with observed per-task differences of standard deviation s is
(z_{1-alpha/2} + z_power) * s / sqrt(n).

>>> tasks_needed(0.5, 0.1, runs_per_task=1, icc=0.5)
385
>>> round(detectable_effect(0.25, 100), 3)
0.07
"""

from __future__ import annotations

import math
from statistics import NormalDist

DEFAULT_ICC = 0.5
"""The share of a run's variance that is its task's own, when the user gives none: midway, neither tasks that are
all-or-nothing nor runs as varied as tasks."""


_NORMAL = NormalDist()
"""The standard normal: the stdlib's quantile agrees with ``scipy.stats.norm.ppf`` to the last digit or two, and
``scipy.stats`` took ~1 s of every report's (and ``summarize-experiment``'s) start-up on 2 cores just for it."""


def _z(alpha: float, power: float) -> float:
    return _NORMAL.inv_cdf(1 - alpha / 2) + _NORMAL.inv_cdf(power)


def difference_sd(baseline_rate: float, effect: float, *, runs_per_task: int, icc: float = DEFAULT_ICC) -> float:
    """Standard deviation of one task's difference in success rate (MAS minus baseline) under the model above."""
    pm = baseline_rate + effect
    if not (0 <= baseline_rate <= 1 and 0 <= pm <= 1):
        raise ValueError(f"rates must lie in [0, 1]: baseline {baseline_rate}, baseline + effect {pm}")
    var = (baseline_rate * (1 - baseline_rate) + pm * (1 - pm)) * (icc + (1 - icc) / runs_per_task)
    return math.sqrt(var)


def tasks_needed(baseline_rate: float, effect: float, *, runs_per_task: int, icc: float = DEFAULT_ICC,
                 alpha: float = 0.05, power: float = 0.8) -> int:
    """Tasks for ``power`` to detect ``effect`` (a difference in success rate, e.g. 0.1 = 10 points)."""
    if effect == 0:
        raise ValueError("an effect of 0 cannot be detected with any number of tasks")
    sd = difference_sd(baseline_rate, effect, runs_per_task=runs_per_task, icc=icc)
    return max(2, math.ceil((_z(alpha, power) * sd / abs(effect)) ** 2))


def detectable_effect(sd: float, n_tasks: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest difference in success rate ``n_tasks`` tasks with per-task differences of standard deviation
    ``sd`` detect with ``power``; None for fewer than 2 tasks."""
    if n_tasks < 2:
        return None
    return _z(alpha, power) * sd / math.sqrt(n_tasks)
