"""Where the tests find data too large or too foreign for the repository (the Who&When split), and what to say when
it is absent.

``MAS_ECON_SHARED_DATA`` names the data directory; without it, ``../shared/data`` beside the repository (the
layout of this project's machines and CI). A test needing the data is skipped with :data:`WHO_AND_WHEN_HOWTO`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV = "MAS_ECON_SHARED_DATA"
REPO = Path(__file__).resolve().parent.parent

WHO_AND_WHEN_HOWTO = (
    "needs the Who&When dev split: Who&When (Zhang et al., ICML 2025; MIT licence) from its authors' release "
    "(GitHub ag2ai/Agents_Failure_Attribution, folder Who&When/; also the Hugging Face dataset Kevin355/Who_and_When), "
    "its JSON logs as DATA/who_and_when/dev/algorithm_generated/*.json and DATA/who_and_when/dev/hand_crafted/*.json, "
    f"where DATA is ${ENV} or ../shared/data beside the repository (see docs/guide/attribution.md, 'Who&When data')"
)


def shared_data() -> Path:
    """The shared data directory: ``$MAS_ECON_SHARED_DATA``, else ``../shared/data`` beside the repository."""
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else REPO.parent / "shared" / "data"


def who_and_when_dev() -> Path | None:
    """The Who&When development split (``algorithm_generated/`` and ``hand_crafted/``), or None when absent."""
    path = shared_data() / "who_and_when" / "dev"
    return path if path.is_dir() else None


needs_who_and_when = pytest.mark.skipif(who_and_when_dev() is None, reason=WHO_AND_WHEN_HOWTO)
"""Skip a test (with the instruction where to get the data) when the Who&When split is absent."""
