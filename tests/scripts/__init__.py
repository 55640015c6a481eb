"""Tests of the scripts in scripts/ (benchmarks, evaluations, the full experiment)."""
