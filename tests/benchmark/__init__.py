"""Tests of the benchmark stage: adapters, native evaluation, the sandbox."""
