"""llama-server's build tree: deleted once the binary works unless asked to keep it; the reference tools
(``scripts/bench_embedded.py``) fetch and configure a fresh tree when it is gone.

The real sdist extraction, copy and ``--version`` check run around a fake download, cmake and compiler.
"""

from __future__ import annotations

import os
import sys
import tarfile
from pathlib import Path

import pytest

from mas.serving import build
from mas.serving.catalogue import CachePaths

@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """The real sdist extraction, copy and ``--version`` check; pip download, cmake and the compiler are faked.

    Returns the commands run; ``works`` makes the compiled binaries answer ``--version`` or fail it.
    """
    src = tmp_path / "sdist-src" / f"llama_cpp_python-{build.SDIST_VERSION}" / "vendor" / "llama.cpp"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    sdist = tmp_path / f"llama_cpp_python-{build.SDIST_VERSION}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(src.parent.parent, arcname=f"llama_cpp_python-{build.SDIST_VERSION}")
    commands: list[list[str]] = []
    state = {"works": True}

    def run_logged(cmd, log, step, say, cwd=None):
        commands.append(cmd)
        if "download" in cmd:
            Path(cmd[cmd.index("-d") + 1], sdist.name).write_bytes(sdist.read_bytes())
        elif "-S" in cmd:
            out = Path(cmd[cmd.index("-B") + 1])
            out.mkdir(parents=True)
            (out / "CMakeCache.txt").write_text("")
        else:
            exe = Path(cmd[2]) / "bin" / cmd[cmd.index("--target") + 1]
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_text(f"#!/bin/sh\nexit {0 if state['works'] else 1}\n")
            exe.chmod(0o755)

    monkeypatch.setattr(build, "_run_logged", run_logged)
    monkeypatch.delenv(build.SDIST_ENV, raising=False)
    monkeypatch.delenv("MAS_KEEP_BUILD", raising=False)
    return commands, state


def test_the_build_tree_is_deleted_once_llama_server_works(fake_build, tmp_path):
    commands, _ = fake_build
    paths = CachePaths(root=tmp_path / "cache")
    said: list[str] = []
    binary = build.build_server(paths, said.append, jobs=1)
    assert binary == paths.server_bin and build.binary_works(binary)
    assert not paths.build_dir.exists()  # the sdist, its extraction and the cmake build
    assert any(s.startswith(f"deleted the llama.cpp build tree {paths.build_dir}") and "--keep-build" in s
               for s in said)
    assert "--no-cache-dir" in commands[0]  # the sdist is not kept in pip's cache either


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_the_build_tree_is_kept_on_request(fake_build, tmp_path, monkeypatch, how):
    paths = CachePaths(root=tmp_path / "cache")
    if how == "environment":
        monkeypatch.setenv("MAS_KEEP_BUILD", "1")  # the documented name
    build.build_server(paths, lambda _m: None, jobs=1, keep_build=True if how == "argument" else None)
    assert (build._build_out(paths) / "bin" / "llama-server").is_file()


def test_a_build_whose_binary_fails_keeps_its_tree_to_resume(fake_build, tmp_path):
    _, state = fake_build
    state["works"] = False
    paths = CachePaths(root=tmp_path / "cache")
    with pytest.raises(build.BuildError, match="does not run"):
        build.build_server(paths, lambda _m: None, jobs=1)
    assert (build._build_out(paths) / "CMakeCache.txt").is_file()


def test_a_reference_tool_rebuilds_from_a_fresh_sdist_once_the_tree_is_gone(fake_build, tmp_path):
    commands, _ = fake_build
    paths = CachePaths(root=tmp_path / "cache")
    build.build_server(paths, lambda _m: None, jobs=1)
    assert not paths.build_dir.exists()
    commands.clear()
    said: list[str] = []
    bench = build.build_reference_tool(paths, "llama-bench", said.append, jobs=1)
    assert bench == paths.bin_dir / "llama-bench" and os.access(bench, os.X_OK)
    assert "deleted after llama-server was built" in said[0] and "fetching llama-cpp-python==" in said[0]
    assert [c[3] if c[:3] == [sys.executable, "-m", "pip"] else c[1] for c in commands] == ["download", "-S",
                                                                                          "--build"]
    # the next tool compiles in the tree that stayed; once `model install` deletes it, both tools remain in bin/
    commands.clear()
    build.build_reference_tool(paths, "llama-batched-bench", said.append, jobs=1)
    assert [c[1] for c in commands] == ["--build"]
    assert build.remove_build_tree(paths, said.append) > 0 and not paths.build_dir.exists()
    commands.clear()
    assert build.build_reference_tool(paths, "llama-bench", said.append) == bench and commands == []
