"""The code sandbox: model-written Python run isolated, and code benchmarks' tests with an unforgeable verdict.

- :mod:`benchmark.sandbox.process`: one sandboxed interpreter with time, memory and output limits (the threat
  model and what isolates it); its program is :mod:`benchmark.sandbox.child`, what it sees of the host
  :mod:`benchmark.sandbox.view`.
- :mod:`benchmark.sandbox.remote`: the tests in one sandbox calling the candidate in another over plain data
  (:mod:`benchmark.sandbox.remote_child`).
"""

from benchmark.sandbox.process import (
    ISOLATION_MODES,
    MAX_OUTPUT_CHARS,
    Isolation,
    SandboxResult,
    SandboxUnavailable,
    arun_python,
    isolation_problem,
    require_isolation,
    run_python,
)
from benchmark.sandbox.remote import RemoteOutcome, RemoteTests, capture_value, run_remote_tests

__all__ = [
    "ISOLATION_MODES",
    "MAX_OUTPUT_CHARS",
    "Isolation",
    "RemoteOutcome",
    "RemoteTests",
    "SandboxResult",
    "SandboxUnavailable",
    "arun_python",
    "capture_value",
    "isolation_problem",
    "require_isolation",
    "run_python",
    "run_remote_tests",
]
