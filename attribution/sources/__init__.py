"""Where failed runs come from: Who&When logs, this project's runs, OpenTelemetry spans, step-score files.

Each source loads into one :class:`~attribution.sources.trajectory.Trajectory` type
(:mod:`.loaders`, :mod:`.span_loader`); :mod:`.scorefile` is the JSONL format ``score-steps`` writes
and conformal prediction reads.
"""
