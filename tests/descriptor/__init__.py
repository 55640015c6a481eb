"""Tests of the descriptor stage: the run-record contract, summaries, the report, the registry."""
