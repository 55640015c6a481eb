"""The sweep's ETA, from the model calls finished rather than the runs.

Runs in flight together finish late and in bursts, so seconds per finished run, early in a sweep, count the
time of every run still in flight against the one that finished: the estimate starts many times too high.
Calls finish all along. The rule:

- each unfinished run will make as many calls as the runs of its (benchmark, system) that finished in this
  invocation made on average (of its system on other benchmarks while none of its own has finished);
- less the calls the runs in flight have made already (never fewer than the calls at the model now);
- at the rate calls have finished in this invocation: seconds left = calls left / (calls finished / seconds).

No ETA until it can be estimated: before a call has finished, or while some unfinished run's system has no
finished run to take its calls per run from. When the process sees no call at all (``dask`` worker processes
make them), runs are the unit instead: seconds per run finished times runs left.

>>> eta_s(elapsed_s=100.0, left={("arith", "sas"): 0, ("arith", "debate"): 5}, done_runs={("arith", "sas"): 6,
...       ("arith", "debate"): 1}, done_calls={("arith", "sas"): 6, ("arith", "debate"): 5}, open_calls=9)
80.0
"""

from __future__ import annotations

from collections.abc import Mapping

Group = tuple[str, str] | None
"""(benchmark, system) of a run; None for runs whose group is not known (every group counts for them)."""


def calls_per_run(group: Group, done_runs: Mapping[Group, int], done_calls: Mapping[Group, int]) -> float | None:
    """Mean calls of the finished runs of ``group``, else of its system on other benchmarks, else None (for the
    ``None`` group: of every finished run).

    >>> calls_per_run(("b2", "debate"), {("b1", "debate"): 2}, {("b1", "debate"): 10})
    5.0
    """
    def mean(keys: list[Group]) -> float | None:
        runs = sum(done_runs.get(k, 0) for k in keys)
        return sum(done_calls.get(k, 0) for k in keys) / runs if runs else None

    if group is None:
        return mean(list(done_runs))
    own = mean([group])
    return own if own is not None else mean([k for k in done_runs if k is not None and k[1] == group[1]])


def eta_s(*, elapsed_s: float, left: Mapping[Group, int], done_runs: Mapping[Group, int],
          done_calls: Mapping[Group, int], open_calls: int = 0, in_flight: int = 0) -> float | None:
    """Seconds until the sweep's runs are done (see the module docstring), or None when it cannot be estimated.

    ``left``: runs not finished (in flight included), by group; ``done_runs``/``done_calls``: runs this invocation
    finished and the calls they made, by group; ``open_calls``: calls finished by runs in flight; ``in_flight``:
    calls at the model now (s, counts).
    """
    remaining = sum(n for n in left.values() if n > 0)
    if remaining == 0:
        return 0.0
    finished_calls = sum(done_calls.values()) + open_calls
    if finished_calls == 0:  # no call seen: runs are the unit
        ran = sum(done_runs.values())
        return elapsed_s / ran * remaining if ran else None
    if elapsed_s <= 0:
        return None
    expected = 0.0
    for group, n in left.items():
        if n <= 0:
            continue
        per_run = calls_per_run(group, done_runs, done_calls)
        if per_run is None:
            return None
        expected += n * per_run
    calls_left = max(expected - open_calls, float(in_flight), 0.0)
    return calls_left / (finished_calls / elapsed_s)
