"""Trace schema, the JSONL writer, and secret redaction."""

import asyncio
import json

import pytest
from pydantic import ValidationError

from descriptor.schema import TraceEvent, TraceReadError, is_system_actor, read_trace
from descriptor.redact import REDACTED, redact
from mas.tracing import JsonlWriter, Tracer


def _event(**kw):
    base = {"timestamp_start": "2026-01-01T00:00:00+00:00", "timestamp_end": "2026-01-01T00:00:01+00:00",
            "actor": "a", "event_type": "act"}
    return {**base, **kw}


def test_valid_event_and_extras():
    ev = TraceEvent.model_validate(_event(payload={"sends": [{"from": "a", "to": "b"}]},
                                          **{"gen_ai.request.model": "m"}))
    assert ev.model_extra == {"gen_ai.request.model": "m"}


@pytest.mark.parametrize("bad", [
    {"event_type": "think"},
    {"timestamp_start": "yesterday"},
    {"token_in": -1},
    {"payload": {"sends": [{"to": "b"}]}},
    {"payload": {"ok": "yes"}},
    {"payload": {"redo": 1}},
])
def test_invalid_events_rejected(bad):
    with pytest.raises(ValidationError):
        TraceEvent.model_validate(_event(**bad))


def test_system_actor_convention():
    assert is_system_actor("system") and is_system_actor("system:controller")
    assert not is_system_actor("systematic") and not is_system_actor("solver")


def test_writer_flushes_each_line_and_crash_leaves_readable_prefix(tmp_path):
    path = tmp_path / "run_0.trace.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("solver", "plan", {"content": "x"}, step=True)
    tracer.emit("solver", "finalize", {"content": "y"}, step=True)
    # no close(): lines are already on disk
    assert [e.payload["step_index"] for e in read_trace(path)] == [0, 1]
    with open(path, "a") as fh:
        fh.write('{"actor": "solver", "event_ty')  # a crash mid-write
    with pytest.raises(TraceReadError, match=r"run_0.trace.jsonl:3"):
        read_trace(path)
    assert len(read_trace(path, strict=False)) == 2


def test_damage_before_the_last_line_is_always_an_error(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps(_event())
    path.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(TraceReadError, match=":2"):
        read_trace(path, strict=False)


def test_secrets_are_redacted_from_events(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123456")
    path = tmp_path / "t.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("solver", "error", {"error": "401 for key sk-test-secret-value-123456"})
    text = path.read_text()
    assert "sk-test-secret-value-123456" not in text and REDACTED in text
    assert redact({"h": ["Bearer abcdefghijklmnopqrstuvwxyz"]}) == {"h": [REDACTED]}


def test_broken_processor_does_not_break_the_run():
    class Broken:
        def on_event(self, e, line):
            raise OSError("disk full")

        def close(self):
            pass

    from mas.tracing import ListCollector

    sink = ListCollector()
    tracer = Tracer("r", [Broken(), sink])
    tracer.emit("a", "act")
    assert len(sink.events) == 1


@pytest.mark.parametrize("secret", ["plain-secret-value-42", 'quote"and\\slash-secret', "ünïcode-sécret-välue"])
def test_secrets_without_key_shape_are_redacted_everywhere(tmp_path, monkeypatch, secret):
    # The tracer searches the serialized event before redacting: the search must find every secret,
    # also one that JSON escapes (quotes, backslashes) or leaves as UTF-8.
    monkeypatch.setenv("SERVICE_TOKEN", secret)
    from mas.tracing import ListCollector

    path, sink = tmp_path / "t.jsonl", ListCollector()
    tracer = Tracer("r", [JsonlWriter(path), sink])
    tracer.emit("tool", "tool_result", {"output": {"lines": [f"token={secret}"]}}, note=f"saw {secret}")
    tracer.emit("tool", "act", {"content": "nothing to hide"})
    text = path.read_text(encoding="utf-8")
    assert secret not in text and json.dumps(secret)[1:-1] not in text and text.count(REDACTED) == 2
    assert sink.events[0].payload == {"output": {"lines": [f"token={REDACTED}"]}}
    assert sink.events[0].model_extra["note"] == f"saw {REDACTED}"
    assert sink.events[1].payload == {"content": "nothing to hide"}


async def test_jsonl_writer_writes_a_loop_steps_lines_before_the_run_waits(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = JsonlWriter(path)
    tracer = Tracer("r", [writer])
    tracer.emit("a", "plan")
    tracer.emit("a", "act")
    await asyncio.sleep(0)  # the run yields (e.g. awaits a model call): its lines are on disk by then
    assert [json.loads(line)["event_type"] for line in path.read_text().splitlines()] == ["plan", "act"]
    tracer.emit("a", "finalize")
    tracer.close()  # closing writes what is pending
    assert len(path.read_text().splitlines()) == 3


def test_jsonl_writer_without_a_loop_writes_each_line_at_once(tmp_path):
    path = tmp_path / "t.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("a", "plan")
    assert len(path.read_text().splitlines()) == 1
    tracer.close()


@pytest.mark.parametrize("extra", [{}, {"usage_source": "provider", "gen_ai.request.model": "m"}])
def test_tracer_events_equal_pydantics_own_construct(extra):
    """The tracer builds events by hand (cheaper); they must be what ``model_construct`` would build."""
    tracer = Tracer("r1", [])
    ev = tracer.emit("agent_0", "act", {"text": "hi"}, token_in=3, latency_ms=1.5, step=True, **extra)
    fields = {k: getattr(ev, k) for k in TraceEvent.model_fields if k != "version"}
    ref = TraceEvent.model_construct(**fields, **extra)
    assert ev == ref
    assert ev.model_fields_set == ref.model_fields_set and ev.model_extra == ref.model_extra
    assert ev.model_dump_json(exclude_none=True) == ref.model_dump_json(exclude_none=True)
    assert TraceEvent.model_validate_json(ev.model_dump_json()) == ev  # and it is a valid event
