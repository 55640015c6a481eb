"""Errors the CLI reports as a plain message (exit code 2) instead of a traceback."""


class UserError(Exception):
    """Bad input from the person running the tool: a path, a file, a key, a flag.

    The message names the file, field and what was expected.
    """
