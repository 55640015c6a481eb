"""The real local model server: start, one structured call, one tool round-trip, stop.

Run with ``python -m pytest tests/mas/test_embedded_server.py -m embedded``. The
binary and the GGUF come from the user cache (built/assembled on first use);
the server itself runs from a private run directory, so the test always owns
it and can check that no process is left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.embedded

MAX_TOKENS = 160  # enough for a short JSON answer or one tool call


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    from mas.config import EmbeddedSettings
    from mas.serving.catalogue import cache_paths
    from mas.serving.process import pid_alive
    from mas.serving.server import ensure_server, install

    shared = EmbeddedSettings()
    install(shared)  # no-op when already built and assembled
    real = cache_paths(shared)
    private = tmp_path_factory.mktemp("embedded-cache")
    (private / "bin").symlink_to(real.bin_dir, target_is_directory=True)
    (private / "models").symlink_to(real.models_dir, target_is_directory=True)
    settings = EmbeddedSettings(cache_dir=str(private), ctx_size=4096, parallel=2, startup_timeout_s=300)
    handle = ensure_server(settings)
    assert handle.owned and pid_alive(handle.pid)
    yield handle
    handle.stop()
    assert not pid_alive(handle.pid), "llama-server still running after stop()"
    assert not _servers_under(private), "a llama-server started by the test is still running"
    assert not (private / "run" / "server.json").exists()


def _servers_under(root: Path) -> list[int]:
    """PIDs of live llama-server processes whose command line mentions ``root``."""
    from mas.serving.process import pid_alive

    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(root).encode() in cmd and pid_alive(int(proc.name)):
                found.append(int(proc.name))
    return found


def _chat(handle, **kw):
    from langchain_openai import ChatOpenAI

    # llama-server ignores max_completion_tokens (what ChatOpenAI sends for
    # max_tokens), so the limit goes in extra_body as max_tokens.
    return ChatOpenAI(
        base_url=handle.base_url, api_key="sk-local", model=handle.model, temperature=0,
        max_retries=1, timeout=600, extra_body={"max_tokens": MAX_TOKENS}, **kw,
    )  # fmt: skip


def test_server_is_healthy_and_serves_the_model(server):
    import httpx

    from mas.serving.server import check_alive

    check_alive(server)
    models = httpx.get(f"{server.base_url}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [server.model]


def test_structured_call_with_json_schema(server):
    schema = {
        "type": "object",
        "properties": {"reasoning": {"type": "string"}, "answer": {"type": "number"}},
        "required": ["reasoning", "answer"],
        "additionalProperties": False,
    }
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}
    model = _chat(server).bind(response_format=rf)
    msg = model.invoke("Tom has 3 apples and buys 4 more. How many apples does he have? Reply in JSON.")
    data = json.loads(msg.content)  # grammar-constrained: must be plain JSON, no fences
    assert set(data) == {"reasoning", "answer"}
    assert isinstance(data["answer"], (int, float))
    usage = msg.usage_metadata
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


def test_tool_call_round_trip(server):
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool

    from mas.llm.jsonparse import parse_json_object

    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers a and b and return the product."""
        return a * b

    chat = _chat(server)
    messages = [
        SystemMessage("You are a careful math assistant. Call a tool when it helps; after a tool result, answer."),
        HumanMessage("A shop sells 23 boxes with 47 pencils each. How many pencils in total? Use the multiply tool."),
    ]
    first = chat.bind_tools([multiply]).invoke(messages)
    if first.tool_calls:  # native tool_calls (what llama-server --jinja returns for Qwen2.5)
        call = first.tool_calls[0]
        protocol = "native"
    else:  # documented fallback: the model writes {"name": ..., "arguments": ...} as text
        parsed = parse_json_object(first.content)
        assert parsed, f"neither tool_calls nor a JSON call in: {first.content!r}"
        call = {"name": parsed["name"], "args": parsed["arguments"], "id": "text-call-0"}
        protocol = "text"
    print(f"tool protocol: {protocol}; call: {call}")
    assert call["name"] == "multiply"
    assert {float(call["args"]["a"]), float(call["args"]["b"])} == {23.0, 47.0}
    result = multiply.invoke(call["args"])
    if protocol == "native":
        messages += [first, ToolMessage(content=str(result), tool_call_id=call["id"])]
    else:
        messages += [first, HumanMessage(f"Tool result of multiply: {result}")]
    # With the tool still bound, Qwen2.5-0.5B often calls it again; the runtime
    # bounds that loop. Without tools the model must answer in text.
    final = chat.invoke(messages)
    print(f"final answer: {final.content!r}")
    assert not final.tool_calls
    assert "1081" in final.content.replace(",", "")
