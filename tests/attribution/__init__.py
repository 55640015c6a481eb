"""Tests of attribution: methods, scorers, conformal sets, rollback."""
