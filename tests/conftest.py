"""Session-wide checks shared by every test module.

No llama-server started by this test session may outlive it (issue 3). The
session marks its environment with a token; a server process inherits it
(also through ``python main.py ...`` subprocesses), so at the end a PID taken
from a server record is ours only when ``/proc/<pid>/environ`` holds the token.
A server someone else runs on this machine (a measurement, ``model serve``)
is never counted, and nothing is ever looked up or signalled by name.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fake_endpoint import FakeEndpoint

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n``), leave out the tests marked ``serial``: they cannot share the machine with other
    tests (a timing, the worker processes of a sweep), so they run after the others, alone
    (``python -m pytest -q -m serial``)."""
    if not hasattr(config, "workerinput"):  # not an xdist worker: every selected test runs here
        return
    serial = [item for item in items if item.get_closest_marker("serial") is not None]
    if serial:
        config.hook.pytest_deselected(items=serial)
        items[:] = [item for item in items if item.get_closest_marker("serial") is None]


SESSION_ENV = "MAS_TEST_SESSION"
"""Environment variable whose value tags processes started by this test session."""


def _recorded_pids(roots: list[Path]) -> set[int]:
    """PIDs in the server records (``run/server.json``) under the cache dirs the tests use."""
    from mas.serving.catalogue import CachePaths
    from mas.serving.process import read_record

    pids = set()
    for root in roots:
        rec = read_record(CachePaths(root=root))
        if rec is not None:
            pids.add(rec.pid)
    return pids


def _cache_roots(basetemp: Path) -> list[Path]:
    """The default cache (embedded tests use it) and every cache a test made under the session's temp dir."""
    from mas.serving.catalogue import cache_root

    private = [p.parent.parent for p in basetemp.rglob("server.json") if p.parent.name == "run"]
    return [cache_root(None), *private]


def _started_by_session(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's process: not ours
        return False
    return f"{SESSION_ENV}={token}".encode() in environ


def _leaked_servers(basetemp: Path, token: str) -> list[int]:
    """Live llama-server PIDs (recorded, or held by a handle of this process) that this session started."""
    from mas.serving.process import pid_alive

    pids = _recorded_pids(_cache_roots(basetemp))
    server_module = sys.modules.get("mas.serving.server")  # not imported: this process started no server
    if server_module is not None:
        pids |= {h.pid for h in server_module._handles.values()}
    return sorted(p for p in pids if pid_alive(p) and _started_by_session(p, token))


@pytest.fixture(scope="session", autouse=True)
def no_llama_server_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the session if a llama-server it started is still running at its end (then stop it, by PID)."""
    token = uuid.uuid4().hex
    previous = os.environ.get(SESSION_ENV)
    os.environ[SESSION_ENV] = token
    try:
        yield
        leaked = _leaked_servers(tmp_path_factory.getbasetemp(), token)
        if leaked:
            from mas.serving.process import terminate

            for pid in leaked:  # do not leave them running for the next session either
                terminate(pid)
            pytest.fail(f"llama-server process(es) started by this test session still running at its end: {leaked}")
    finally:
        if previous is None:
            os.environ.pop(SESSION_ENV, None)
        else:
            os.environ[SESSION_ENV] = previous


@pytest.fixture(scope="session", autouse=True)
def scripted_double() -> None:
    """Register the scripted double as the provider ``scripted`` in this test process (importing its provider
    module registers it). An installed project finds it through its entry point anyway; this makes a test
    session independent of the installed metadata. ``python main.py ...`` subprocesses still find it through
    the entry point: a checkout whose pyproject declares entry points the installed metadata lacks is
    reinstalled (``pip install -e .``)."""
    import mas.scripted.provider  # noqa: F401


@pytest.fixture
def endpoint() -> Iterator[Callable[..., FakeEndpoint]]:
    """``endpoint(reply, keep_alive=False)`` starts a :class:`tests.fake_endpoint.FakeEndpoint` on 127.0.0.1;
    every one started is closed after the test."""
    servers: list[FakeEndpoint] = []

    def make(reply, **kwargs) -> FakeEndpoint:
        servers.append(FakeEndpoint(reply, **kwargs))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def scripted_provider() -> Iterator[Callable[..., str]]:
    """``scripted_provider({contract: answer})`` registers a scripted provider of this test's own, whose models
    answer those contracts ahead of the registered answers, and returns its name for a route's ``provider``;
    unregistered after the test."""
    from mas.llm.providers import PROVIDERS
    from mas.scripted.provider import scripted_with

    names: list[str] = []

    def make(responders) -> str:
        names.append(f"scripted-test-{uuid.uuid4().hex[:8]}")
        PROVIDERS.register(names[-1], scripted_with(responders))
        return names[-1]

    yield make
    for name in names:
        PROVIDERS.unregister(name)
