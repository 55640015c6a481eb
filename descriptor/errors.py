"""Errors the CLI reports as a plain message (exit code 2) instead of a traceback."""

from __future__ import annotations

import errno
import os

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class UserError(Exception):
    """Bad input from the person running the tool: a path, a file, a key, a flag.

    The message names the file, field and what was expected.
    """


def disk_full(err: BaseException) -> OSError | None:
    """The "no space left" error (ENOSPC, or EDQUOT: over quota) behind ``err``, if any.

    A full disk is no bug to show a traceback for: commands report it in one
    line, and every file is written atomically, so running the same command
    again once there is space finishes the work.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _NO_SPACE:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def disk_full_message(err: OSError) -> str:
    """One line naming the file that could not be written."""
    where = f" writing {err.filename}" if err.filename else ""
    return f"{err.strerror or 'no space left on device'}{where}"


def bad_path(err: BaseException) -> str | None:
    """One line for an output path that cannot be written as given (a directory where a file goes, a file where a
    directory goes), behind ``err``; None for any other error.

    Such a path is the user's to change, not a failure of the tool: the commands report it like bad input
    (exit 2) instead of a traceback. Their outputs are written atomically, so nothing is left half-written.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, IsADirectoryError):
            return f"{seen.filename2 or seen.filename}: is a directory; expected a file path"
        if isinstance(seen, NotADirectoryError):
            return f"{seen.filename}: part of this path is a file, not a directory"
        if isinstance(seen, FileExistsError) and seen.filename and os.path.isfile(seen.filename):
            return f"{seen.filename}: is a file; expected a directory"  # a mkdir of a path that is a file
        seen = seen.__cause__ or seen.__context__
    return None
