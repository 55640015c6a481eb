"""Against a real Arize Phoenix (started here on 127.0.0.1, stopped by PID): a scripted sweep exported live.

Phoenix's API must return every run's trace with the right parent/child
structure and token counts equal to the JSONL traces'; its span export must
load back as the runs' trajectories (``--spans``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from attribution.sources.loaders import load_run
from attribution.sources.span_loader import load_spans
from descriptor.events import read_trace
from tests.otel_helpers import (
    chat_token_sums,
    check_tree,
    jsonl_tokens,
    runs_of,
    scripted_sweep,
)
from tests.processes import stop_group

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    pytest.importorskip("phoenix", reason="needs the [integrations] extra (arize-phoenix)")
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port()),
           "PHOENIX_WORKING_DIR": str(work), "PHOENIX_TELEMETRY_ENABLED": "false"}
    env.pop("PHOENIX_SQL_DATABASE_URL", None)
    log = open(work / "phoenix.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (work / "phoenix.log").read_text()[-3000:]
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, "Phoenix did not answer within 180 s"
            time.sleep(1)
        yield base
    finally:
        stop_group(proc, timeout_s=30)
        log.close()


def _phoenix_spans(base: str, project: str = "default") -> list[dict]:
    spans, cursor = [], None
    while True:
        params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{base}/v1/projects/{project}/spans", params=params, timeout=60).json()
        spans += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def _root_token_counts(base: str) -> dict[str, tuple[int, int]]:
    """Phoenix's own cumulative token counts of each trace's root span (GraphQL), by trace id."""
    query = ("{ projects { edges { node { name spans(first: 1000, filterCondition: \"parent_id is None\") { edges { node { parentId context { traceId } "
             "cumulativeTokenCountPrompt cumulativeTokenCountCompletion } } } } } } }")
    data = httpx.post(f"{base}/graphql", json={"query": query}, timeout=60).json()
    assert not data.get("errors"), data["errors"]
    project = next(e["node"] for e in data["data"]["projects"]["edges"] if e["node"]["name"] == "default")
    return {n["context"]["traceId"]: (int(n["cumulativeTokenCountPrompt"]), int(n["cumulativeTokenCountCompletion"]))
            for n in (e["node"] for e in project["spans"]["edges"]) if n["parentId"] is None}


def test_phoenix_holds_every_run_with_its_structure_and_tokens(phoenix, tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix)
    exp = scripted_sweep(tmp_path, systems=["sas", "supervisor", "debate", "orchestrator"], tasks=2, inject=0.5)
    runs = runs_of(exp)
    want = {m["otel_trace_id"] for _, m in runs}
    deadline = time.monotonic() + 60
    while True:  # Phoenix ingests in the background
        spans = _phoenix_spans(phoenix)
        by_trace: dict[str, list[dict]] = {}
        for s in spans:
            by_trace.setdefault(s["context"]["trace_id"], []).append(s)
        if want <= set(by_trace) and all(
                len(by_trace[m["otel_trace_id"]]) >= len({e.span_id for e in read_trace(t)}) + 1 for t, m in runs):
            break
        assert time.monotonic() < deadline, f"Phoenix has {len(want & set(by_trace))} of {len(want)} traces"
        time.sleep(1)
    roots = _root_token_counts(phoenix)
    for trace, meta in runs:
        got = [{"span_id": s["context"]["span_id"], "parent_span_id": s["parent_id"], "name": s["name"],
                "attributes": s["attributes"], "kind": s["span_kind"]} for s in by_trace[meta["otel_trace_id"]]]
        root = check_tree(got)
        assert root["attributes"]["mas.system"] == meta["system"] and root["attributes"]["mas.task_id"] == meta["task_id"]
        assert {s["kind"] for s in got if s["name"].startswith("chat ")} == {"LLM"}
        assert {s["kind"] for s in got if s["name"].startswith("execute_tool ")} <= {"TOOL"}
        assert {s["kind"] for s in got if s["name"].startswith("invoke_agent ")} == {"AGENT"}
        # the token counts Phoenix derived from the GenAI attributes, per span and summed by Phoenix itself
        tokens = jsonl_tokens(trace)
        assert chat_token_sums(got) == tokens
        llm = [s for s in got if s["kind"] == "LLM"]
        assert (sum(s["attributes"]["llm.token_count.prompt"] for s in llm),
                sum(s["attributes"]["llm.token_count.completion"] for s in llm)) == tokens
        assert roots[meta["otel_trace_id"]] == tokens
        assert {e.span_id for e in read_trace(trace)} <= {s["span_id"] for s in got}

    # Phoenix's span export reads back as the runs' trajectories: the same agents in the same order
    export = tmp_path / "phoenix_spans.json"
    export.write_text(json.dumps({"data": spans}))
    loaded = {t.id.split("/")[-1]: t for t in load_spans(export).trajectories}
    for trace, meta in runs:
        own = load_run(trace.parent, meta["run_index"])
        from_phoenix = loaded[meta["otel_trace_id"]]
        assert [s.agent for s in from_phoenix.steps] == [s.agent for s in own.steps], meta["run_id"]
