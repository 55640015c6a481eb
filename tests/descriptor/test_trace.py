"""Trace events (the typed union, version 2, reading version 1), the JSONL writer, and secret redaction."""

import asyncio
import json

import pytest
from pydantic import ValidationError

from descriptor.events import (
    TRACE_VERSION,
    ActEvent,
    AgentOutput,
    Decision,
    ErrorInfo,
    FinalAnswer,
    FinalizeEvent,
    FinalVote,
    ToolCall,
    ToolResult,
    TraceReadError,
    VerifyEvent,
    is_system_actor,
    parse_event,
    read_trace,
)
from descriptor.redact import REDACTED, redact
from mas.tracing import JsonlWriter, ListCollector, Tracer


def _event(**kw):
    base = {"timestamp_start": "2026-01-01T00:00:00+00:00", "timestamp_end": "2026-01-01T00:00:01+00:00",
            "actor": "a", "event_type": "act",
            "payload": {"kind": "answer", "role": "solver", "answer_artifact": "42", "confidence": 0.5}}
    return {**base, **kw}


def _answer(**kw):
    return AgentOutput(**{"role": "solver", "answer_artifact": "42", "confidence": 0.5, **kw})


def test_each_event_type_is_its_own_class_with_a_typed_payload():
    ev = parse_event(_event(payload={"kind": "answer", "role": "solver", "answer_artifact": "7", "confidence": 0.9,
                                     "sends": [{"from": "a", "to": "b"}]}))
    assert isinstance(ev, ActEvent) and isinstance(ev.payload, AgentOutput) and ev.version == TRACE_VERSION
    assert ev.payload.sends[0].from_ == "a"
    verify = parse_event(_event(event_type="verify", actor="system:controller",
                                payload={"kind": "termination", "stage": "debate", "round": 1, "max_rounds": 3,
                                         "stop": True, "reason": "consensus_reached"}))
    assert isinstance(verify, VerifyEvent) and isinstance(verify.payload, Decision)
    vote = parse_event(_event(event_type="verify", actor="system:judge",
                              payload={"kind": "final_vote", "vote_source": "lexical", "winner_index": 0,
                                       "winner_agent": "d0", "groups": [["d0"]]}))
    assert isinstance(vote.payload, FinalVote)
    final = parse_event(_event(event_type="finalize", actor="system:judge",
                               payload={"kind": "final_answer", "answer_artifact": "7", "confidence": 1.0,
                                        "source_agent": "d0", "selection": "lexical"}))
    assert isinstance(final, FinalizeEvent) and isinstance(final.payload, FinalAnswer)


def test_version_1_lines_are_upgraded_on_reading():
    v1 = {"version": 1, "timestamp_start": "2026-01-01T00:00:00+00:00", "timestamp_end": "2026-01-01T00:00:00+00:00",
          "actor": "system:judge", "event_type": "finalize", "gen_ai.request.model": "m", "usage_source": "provider",
          "payload": {"answer_artifact": "7", "confidence": 1.0, "source_agent": "d0", "selection": "lexical"}}
    ev = parse_event(v1)
    assert isinstance(ev.payload, FinalAnswer) and ev.model == "m" and ev.version == 1
    decision = parse_event({**v1, "event_type": "verify", "actor": "system:controller",
                            "payload": {"stage": "debate", "round": 0, "max_rounds": 3, "stop": False, "reason": None}})
    assert isinstance(decision.payload, Decision)
    agent = parse_event({**v1, "actor": "solver", "payload": {"role": "solver", "content": "x",
                                                               "answer_artifact": "7", "confidence": 0.5}})
    assert isinstance(agent.payload, AgentOutput)


@pytest.mark.parametrize("bad", [
    {"event_type": "think"},
    {"timestamp_start": "yesterday"},
    {"timestamp_start": "2026-01-01T00:00:00+02:00"},
    {"token_in": -1},
    {"token_in": "5"},
    {"payload": {"kind": "answer", "role": "s", "answer_artifact": "1", "confidence": 1, "sends": [{"to": "b"}]}},
    {"payload": {"kind": "answer", "role": "s", "answer_artifact": "1", "confidence": 1, "redo": "yes"}},
    {"payload": {"kind": "answer", "role": "s", "confidence": 1}},  # no answer
    {"event_type": "tool_result", "payload": {"kind": "tool_result", "tool": "t", "ok": "yes", "output": ""}},
    {"event_type": "verify", "payload": {"kind": "termination", "stage": "debate"}},
])
def test_invalid_events_rejected(bad):
    with pytest.raises(ValidationError):
        parse_event(_event(**bad))


def test_system_actor_convention():
    assert is_system_actor("system") and is_system_actor("system:controller")
    assert not is_system_actor("systematic") and not is_system_actor("solver")


def test_emitting_a_payload_of_the_wrong_type_fails_where_it_is_written():
    with pytest.raises(ValidationError):
        Tracer("r", []).emit("a", "tool_result", _answer())


def test_writer_flushes_each_line_and_crash_leaves_readable_prefix(tmp_path):
    path = tmp_path / "run_0.trace.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("solver", "plan", _answer(content="x"), step=True)
    tracer.emit("solver", "finalize", _answer(content="y"), step=True)
    # no close(): lines are already on disk
    assert [e.step_index for e in read_trace(path)] == [0, 1]
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


def test_a_redo_tracer_marks_every_step():
    sink = ListCollector()
    tracer = Tracer("r", [sink], first_step=4, redo=True)
    tracer.emit("solver", "act", _answer(), step=True)
    tracer.emit("solver", "tool_result", ToolResult(tool="calculator", ok=True, output="1"))
    assert (sink.events[0].step_index, sink.events[0].payload.redo) == (4, True)
    assert sink.events[1].payload.redo is None


def test_secrets_are_redacted_from_events(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123456")
    path = tmp_path / "t.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("solver", "error", ErrorInfo(kind="llm_call", error="401 for key sk-test-secret-value-123456"))
    text = path.read_text()
    assert "sk-test-secret-value-123456" not in text and REDACTED in text
    assert redact({"h": ["Bearer abcdefghijklmnopqrstuvwxyz"]}) == {"h": [REDACTED]}


def test_broken_processor_does_not_break_the_run():
    class Broken:
        def on_event(self, e, line):
            raise OSError("disk full")

        def close(self):
            pass

    sink = ListCollector()
    tracer = Tracer("r", [Broken(), sink])
    tracer.emit("a", "act", _answer())
    assert len(sink.events) == 1


@pytest.mark.parametrize("secret", ["plain-secret-value-42", 'quote"and\\slash-secret', "ünïcode-sécret-välue"])
def test_secrets_without_key_shape_are_redacted_everywhere(tmp_path, monkeypatch, secret):
    # The tracer searches the serialized event before redacting: the search must find every secret,
    # also one that JSON escapes (quotes, backslashes) or leaves as UTF-8.
    monkeypatch.setenv("SERVICE_TOKEN", secret)
    path, sink = tmp_path / "t.jsonl", ListCollector()
    tracer = Tracer("r", [JsonlWriter(path), sink])
    tracer.emit("tool", "tool_call", ToolCall(role="solver", tool="python", arguments={"code": f"print('{secret}')"},
                                              note=f"saw {secret}"))
    tracer.emit("tool", "act", _answer(content="nothing to hide"))
    text = path.read_text(encoding="utf-8")
    assert secret not in text and json.dumps(secret)[1:-1] not in text and text.count(REDACTED) == 2
    assert sink.events[0].payload.arguments == {"code": f"print('{REDACTED}')"}
    assert sink.events[0].payload.model_extra["note"] == f"saw {REDACTED}"
    assert sink.events[1].payload.content == "nothing to hide"


async def test_jsonl_writer_writes_a_loop_steps_lines_before_the_run_waits(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = JsonlWriter(path)
    tracer = Tracer("r", [writer])
    tracer.emit("a", "plan", _answer())
    tracer.emit("a", "act", _answer())
    await asyncio.sleep(0)  # the run yields (e.g. awaits a model call): its lines are on disk by then
    assert [json.loads(line)["event_type"] for line in path.read_text().splitlines()] == ["plan", "act"]
    tracer.emit("a", "finalize", _answer())
    tracer.close()  # closing writes what is pending
    assert len(path.read_text().splitlines()) == 3


def test_jsonl_writer_without_a_loop_writes_each_line_at_once(tmp_path):
    path = tmp_path / "t.jsonl"
    tracer = Tracer("r", [JsonlWriter(path)])
    tracer.emit("a", "plan", _answer())
    assert len(path.read_text().splitlines()) == 1
    tracer.close()


def test_trace_lines_round_trip_through_the_schema():
    sink = ListCollector()
    tracer = Tracer("r1", [sink])
    ev = tracer.emit("agent_0", "act", _answer(round=2), token_in=3, latency_ms=1.5, step=True, model="m",
                     usage_source="provider")
    line = ev.model_dump_json(exclude_none=True, by_alias=True)
    assert parse_event(json.loads(line)) == ev
    assert json.loads(line)["payload"]["kind"] == "answer" and json.loads(line)["model"] == "m"
