"""Defaults of a sweep's options, in a module of their own so that the command line shows them without
importing the sweep."""

DEFAULT_RETRY_ERRORS = 3
"""Times a run that ended in an infrastructure error is run again by later invocations (``--retry-errors``)."""
