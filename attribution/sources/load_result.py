"""What a load of trajectories returns, and the error a file that cannot become one raises.

Apart from :mod:`attribution.sources.loaders` so the span loader, which that module dispatches to, can use them too.
"""

from __future__ import annotations

from pydantic import BaseModel

from attribution.sources.trajectory import Trajectory


class MalformedFile(ValueError):
    """A data file that cannot become a trajectory; the message names file and field."""


class SkippedFile(BaseModel):
    """One file a directory load skipped, and why."""

    path: str
    reason: str


class LoadResult(BaseModel):
    """Trajectories loaded from a directory, plus the files skipped on the way."""

    trajectories: list[Trajectory]
    skipped: list[SkippedFile] = []
