"""Build llama.cpp's ``llama-server`` from the source vendored in a PyPI sdist.

The ``llama-cpp-python`` sdist carries the full llama.cpp tree under
``vendor/llama.cpp``; PyPI is reachable where model hubs are not, so the
project builds its server from there: ``pip download`` the sdist, extract it,
``cmake`` configure and build only the ``llama-server`` target, then copy the
binary into ``<cache>/bin``. C++ outside the CPU kernels compiles at ``-O1``
(:data:`CMAKE_FLAGS`): 416 s of CPU instead of 584 s at ``-O3`` everywhere,
at the same prefill and decode speed. Once the copied binary answers
``--version`` the build tree (the sdist and the cmake build, about 220 MB) is
deleted, unless it is asked for: ``model install --keep-build`` or
``MAS_KEEP_BUILD=1``. Every step logs to ``<cache>/logs/llama-build.log``;
progress lines go to the caller.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from descriptor.errors import UserError
from mas.serving.catalogue import CachePaths, Progress

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.16"
SDIST_ENV = "MAS_LLAMA_SDIST"
"""Optional path to an already downloaded sdist tarball (offline installs); it is never deleted."""
KEEP_BUILD_ENV = "MAS_KEEP_BUILD"
"""``1`` keeps the build tree after llama-server is built, as ``model install --keep-build`` does."""

CMAKE_FLAGS = (
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    # C++ at -O1 except the CPU backend's kernels (KERNELS_O3): the server's HTTP/JSON code, the model
    # loader and the chat templates are most of the compile time and none of the tokens/s.
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
)

KERNELS_O3 = """# mas-econ: read after project(); once every target exists, the CPU backend compiles at -O3 again
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL set_property TARGET ggml-cpu APPEND PROPERTY COMPILE_OPTIONS -O3)
"""
"""Given to cmake as ``CMAKE_PROJECT_INCLUDE``: the target's own ``-O3`` comes after the release flags, and the
last ``-O`` wins, so ggml-cpu's C++ (matrix products, repacked quants, ops) keeps full optimisation. Its C
files keep CMake's C release flags (``-O3``) anyway."""

_PERCENT_RE = re.compile(r"^\[\s*(\d+)%\]")


class BuildError(UserError):
    """Building llama-server failed; the message names the step and the log file."""


def binary_works(path: Path) -> bool:
    """True when ``path`` is an executable llama-server that answers ``--version``."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        res = subprocess.run([str(path), "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def _run_logged(cmd: list[str], log: Path, step: str, say: Progress, cwd: Path | None = None) -> None:
    """Run ``cmd`` appending its output to ``log``; report cmake's ``[ NN%]`` lines every 10 %."""
    say(f"{step}: {' '.join(cmd)}")
    last_pct = -10
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except FileNotFoundError:
            raise BuildError(f"{step}: {cmd[0]} is not installed (needed to build llama-server)") from None
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            m = _PERCENT_RE.match(line)
            if m and int(m.group(1)) >= last_pct + 10:
                last_pct = int(m.group(1))
                say(f"{step}: {last_pct}%")
        code = proc.wait()
    if code != 0:
        raise BuildError(f"{step} failed with exit code {code}; see {log}")


def _fetch_sdist(build_dir: Path, log: Path, say: Progress) -> Path:
    """Path of the sdist tarball: ``$MAS_LLAMA_SDIST``, a previous download, or ``pip download``.

    ``--no-cache-dir``: the tarball (~50 MB) goes into the build tree, deleted after the build, and nowhere else.
    """
    env = os.environ.get(SDIST_ENV)
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise BuildError(f"${SDIST_ENV} points to {p}, which is not a file")
        return p
    name = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
    existing = build_dir / name
    if existing.is_file():
        return existing
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-cache-dir",
        f"{SDIST_PACKAGE}=={SDIST_VERSION}", "-d", str(build_dir),
    ]  # fmt: skip
    _run_logged(cmd, log, "downloading llama.cpp source", say)
    if not existing.is_file():
        raise BuildError(f"pip download did not produce {existing}; see {log}")
    return existing


def _extract(sdist: Path, build_dir: Path, say: Progress) -> Path:
    """Extract the sdist once; return its ``vendor/llama.cpp`` directory."""
    src = build_dir / f"llama_cpp_python-{SDIST_VERSION}"
    tree = src / "vendor" / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file():
        return tree
    say(f"extracting {sdist.name}")
    with tarfile.open(sdist) as tar:
        tar.extractall(build_dir, filter="data")
    if not (tree / "CMakeLists.txt").is_file():
        raise BuildError(f"{sdist}: no vendor/llama.cpp/CMakeLists.txt inside; is it the llama-cpp-python sdist?")
    return tree


def _build_out(paths: CachePaths) -> Path:
    """The cmake build directory inside the extracted sdist."""
    return paths.build_dir / f"llama_cpp_python-{SDIST_VERSION}" / "vendor" / "llama.cpp" / "build"


def _configured_tree(paths: CachePaths, log: Path, say: Progress) -> Path:
    """Fetch, extract and ``cmake`` configure the llama.cpp tree; return its build directory."""
    paths.build_dir.mkdir(parents=True, exist_ok=True)
    tree = _extract(_fetch_sdist(paths.build_dir, log, say), paths.build_dir, say)
    out = tree / "build"
    kernels = paths.build_dir / "kernels_o3.cmake"
    kernels.write_text(KERNELS_O3)
    _run_logged(["cmake", "-S", str(tree), "-B", str(out), *CMAKE_FLAGS, f"-DCMAKE_PROJECT_INCLUDE={kernels}"], log,
                "configuring", say)
    return out


def keep_build_requested(keep_build: bool | None = None) -> bool:
    """``keep_build`` when given, else whether ``$MAS_KEEP_BUILD`` is ``1``."""
    if keep_build is not None:
        return keep_build
    return os.environ.get(KEEP_BUILD_ENV, "").strip() == "1"


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def remove_build_tree(paths: CachePaths, progress: Progress) -> int:
    """Delete ``<cache>/build`` (the sdist and the cmake build) if it is there; return the bytes freed.

    A tree that cannot be deleted is reported, never an error: the server it built works without it.
    """
    tree = paths.build_dir
    if not tree.exists():
        return 0
    size = _tree_bytes(tree)
    try:
        shutil.rmtree(tree)
    except OSError as err:
        progress(f"could not delete the llama.cpp build tree {tree}: {err}")
        return 0
    progress(f"deleted the llama.cpp build tree {tree} ({size / 1e6:.0f} MB; "
             f"`model install --keep-build` or {KEEP_BUILD_ENV}=1 keeps it)")
    return size


def build_server(paths: CachePaths, progress: Progress, jobs: int | None = None, *,
                 keep_build: bool | None = None) -> Path:
    """Build ``llama-server`` into ``<cache>/bin`` unless a working one is already there.

    Returns the binary's path. ``jobs`` defaults to the usable CPU cores. Once the binary in ``<cache>/bin``
    works, the build tree is deleted unless :func:`keep_build_requested` (``keep_build``, else
    ``$MAS_KEEP_BUILD``); a failed build keeps its tree, so the next attempt resumes it.
    """
    target = paths.server_bin
    if binary_works(target):
        return target
    t0 = time.monotonic()
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    log = paths.logs_dir / "llama-build.log"
    progress(f"building llama-server from {SDIST_PACKAGE}=={SDIST_VERSION} (a few minutes, once); log: {log}")
    out = _configured_tree(paths, log, progress)
    n = jobs or len(os.sched_getaffinity(0))
    _run_logged(["cmake", "--build", str(out), "--target", "llama-server", f"-j{n}"], log, "compiling", progress)
    built = out / "bin" / "llama-server"
    if not binary_works(built):
        raise BuildError(f"the build finished but {built} does not run; see {log}")
    paths.bin_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".llama-server.{os.getpid()}.tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, target)
    if not binary_works(target):
        raise BuildError(f"{target} was copied from {built} but does not run; see {log}")
    progress(f"built {target} in {time.monotonic() - t0:.0f} s")
    if not keep_build_requested(keep_build):
        remove_build_tree(paths, progress)
    return target


def build_reference_tool(paths: CachePaths, target: str, progress: Progress, jobs: int | None = None) -> Path:
    """Build one more llama.cpp tool (``llama-bench``, ``llama-batched-bench``) into ``<cache>/bin``.

    For measuring the server against llama.cpp's own figures on the same GGUF and threads
    (``scripts/bench_embedded.py``); never needed to run the project. Returns the binary's path. A tool already in
    ``<cache>/bin`` is reused. Otherwise it compiles in the build tree, which is fetched and configured again from
    a fresh sdist when :func:`build_server` deleted it (minutes: the libraries compile again), and stays afterwards
    so that the next tool compiles only its own sources; ``model install`` deletes it.
    """
    installed = paths.bin_dir / target
    if installed.is_file() and os.access(installed, os.X_OK):
        return installed
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    log = paths.logs_dir / "llama-build.log"
    out = _build_out(paths)
    built = out / "bin" / target
    if not (built.is_file() and os.access(built, os.X_OK)):
        if not (out / "CMakeCache.txt").is_file():
            progress(f"building {target}: no configured llama.cpp build tree in {paths.build_dir} (deleted after "
                     f"llama-server was built): fetching {SDIST_PACKAGE}=={SDIST_VERSION} again and configuring a "
                     f"fresh tree (a few minutes); log: {log}")
            out = _configured_tree(paths, log, progress)
            built = out / "bin" / target
        n = jobs or len(os.sched_getaffinity(0))
        _run_logged(["cmake", "--build", str(out), "--target", target, f"-j{n}"], log, f"compiling {target}", progress)
        if not built.is_file():
            raise BuildError(f"the build finished but {built} is missing; see {log}")
    paths.bin_dir.mkdir(parents=True, exist_ok=True)
    tmp = installed.with_name(f".{target}.{os.getpid()}.tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, installed)
    progress(f"built {installed}; the build tree {paths.build_dir} stays for further tools "
             f"(`python main.py model install` deletes it)")
    return installed
