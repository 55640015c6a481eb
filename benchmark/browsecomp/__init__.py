"""BrowseComp: encrypted questions, search and open-page tools over a corpus or the web, upstream's grading."""

from benchmark.browsecomp.adapter import BrowseCompBenchmark

__all__ = ["BrowseCompBenchmark"]
