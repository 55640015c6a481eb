"""SciCode (scientific research code in multi-step problems): the ``scicode`` benchmark.

``adapter`` registers :class:`SciCodeBenchmark`; ``data`` reads the vendored problems and templates, ``prompts``
builds upstream's multi-step prompts, ``targets`` gives the expected values (computed from the ground truth or
read from ``test_data.h5``), ``compare`` holds upstream's comparison rules as the judge runs them.
"""

from benchmark.scicode.adapter import SciCodeBenchmark

__all__ = ["SciCodeBenchmark"]
