"""Rollback and restart of failed runs: one run (:mod:`.restart`), every failed run of a sweep per strategy
(:mod:`.experiment`), and the automatic rollback after ``run --rollback`` (:mod:`.sweep`)."""
