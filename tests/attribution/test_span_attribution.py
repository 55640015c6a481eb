"""Attribution of another program's failed run from its OpenTelemetry spans (issue 23).

The program below is a plain LangGraph app with three agents (planner,
solver, reviewer) on a fake chat model, instrumented with OpenInference's
LangChain instrumentation and exporting its spans to a file as the
OpenTelemetry Collector's file exporter writes them (OTLP JSON, one export
request per line). The solver is made to fail at a known step; the span file
is then scored by ``score-steps`` (the learned scorer trained on the Who&When
dev split) and ``predict-set`` (calibrated on that split) must name a set
holding that step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from langgraph.graph.message import add_messages

from attribution.sources.loaders import load_trajectories
from attribution.sources.span_loader import load_spans, read_span_file
from descriptor.errors import UserError
from tests.shared_data import needs_who_and_when, shared_data

pytest.importorskip("openinference.instrumentation.langchain",
                    reason="needs the [integrations] extra (openinference-instrumentation-langchain)")

WHO_AND_WHEN = shared_data() / "who_and_when" / "dev"

QUESTION = "A bakery packs muffins in boxes of 12. It sells 23 boxes in the morning and 5 boxes in the afternoon. " \
           "How many muffins did it sell?"
# The replies of the three agents in call order; the solver's first reply is the decisive mistake (23 + 5 = 27).
REPLIES = {
    "planner": ["Plan: (1) add the boxes sold in the morning and the afternoon; (2) multiply the boxes by 12 "
                "muffins per box; (3) check the arithmetic and state the total number of muffins."],
    "solver": ["Step 1: boxes sold = 23 + 5 = 27 boxes.",
               "TOOL multiply 27 12",
               "Step 2: muffins = 27 * 12 = 324 muffins, as the tool computed.",
               "The total is 324 muffins."],
    "reviewer": ["The multiplication 27 * 12 = 324 is correct and the plan was followed.",
                 "Final answer: 324 muffins."],
}
MISTAKE_STEP = 1  # planner's reply is step 0


class State(TypedDict):
    question: str
    messages: Annotated[list, add_messages]
    answer: str


def write_agent_program_spans(path: Path) -> None:
    """Run the independent agent program once with its spans going to ``path`` (OTLP JSON lines)."""
    from google.protobuf.json_format import MessageToDict
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class OtlpJsonFileExporter(SpanExporter):
        """Writes each export as one line of OTLP JSON (ids in hex), like the collector's file exporter."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            doc = MessageToDict(encode_spans(spans))
            for rs in doc.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in s:
                                s[key] = __import__("base64").b64decode(s[key]).hex()
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(doc) + "\n")
            return SpanExportResult.SUCCESS

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    def fake(name: str) -> GenericFakeChatModel:
        msgs = []
        for text in REPLIES[name]:
            if text.startswith("TOOL "):
                _, tname, a, b = text.split()
                msgs.append(AIMessage(content="", tool_calls=[{"name": tname, "args": {"a": int(a), "b": int(b)},
                                                                "id": f"call_{a}_{b}"}]))
            else:
                msgs.append(AIMessage(content=text))
        return GenericFakeChatModel(messages=iter(msgs))

    planner, solver, reviewer = fake("planner"), fake("solver"), fake("reviewer")

    def plan(state: State) -> dict:
        return {"messages": [planner.invoke([HumanMessage(state["question"])])]}

    def solve(state: State) -> dict:
        history = [HumanMessage(state["question"]), *state["messages"]]
        out = []
        for _ in range(len(REPLIES["solver"])):
            reply = solver.invoke([*history, *out])
            out.append(reply)
            for call in reply.tool_calls:
                result = multiply.invoke(call["args"])
                out.append(ToolMessage(content=str(result), tool_call_id=call["id"], name=call["name"]))
        return {"messages": out}

    def review(state: State) -> dict:
        history = [HumanMessage(state["question"]), *state["messages"]]
        first = reviewer.invoke(history)
        final = reviewer.invoke([*history, first])
        return {"messages": [first, final], "answer": final.content}

    g = StateGraph(State)
    g.add_node("planner", plan)
    g.add_node("solver", solve)
    g.add_node("reviewer", review)
    g.add_edge(START, "planner")
    g.add_edge("planner", "solver")
    g.add_edge("solver", "reviewer")
    g.add_edge("reviewer", END)
    app = g.compile()

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter()))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        out = app.invoke({"question": QUESTION, "messages": []})
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert out["answer"] == "Final answer: 324 muffins."  # 28 * 12 = 336: the run failed


@pytest.fixture(scope="module")
def span_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spans") / "bakery.jsonl"
    write_agent_program_spans(path)
    return path


def test_spans_of_another_program_load_as_its_trajectory(span_file):
    spans = read_span_file(span_file)
    assert len({s.trace_id for s in spans}) == 1
    (traj,) = load_spans(span_file).trajectories
    assert traj.query == QUESTION and traj.final_answer == "Final answer: 324 muffins."
    assert [s.agent for s in traj.steps] == ["planner", "solver", "solver", "solver", "solver", "reviewer", "reviewer"]
    assert "23 + 5 = 27" in traj.steps[MISTAKE_STEP].content
    assert traj.steps[2].kind == "tool_call" and "multiply" in traj.steps[2].content
    assert "-> tool result (multiply): 324" in traj.steps[2].content
    assert traj.mistake_step is None  # spans carry no labels
    assert load_trajectories(spans=span_file).trajectories[0].id == traj.id


def test_bad_span_files_are_named(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}')
    with pytest.raises(UserError, match=r"x.json: span 0.traceId: expected a 32-digit hex id"):
        load_spans(bad)
    (tmp_path / "y.jsonl").write_text("{not json\n")
    loaded = load_spans(tmp_path)
    assert not loaded.trajectories and len(loaded.skipped) == 2
    with pytest.raises(UserError, match="not found"):
        load_spans(tmp_path / "missing")


def _edited(span_file: Path, out: Path, edit) -> Path:
    """``span_file`` with ``edit(span)`` applied to its first model-call span (returns extra spans to add)."""
    lines, done = [], False
    for line in span_file.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for sp in list(ss.get("spans", [])):
                    if not done and "ChatModel" in sp.get("name", ""):
                        ss["spans"] += edit(sp) or []
                        done = True
        lines.append(json.dumps(doc))
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_forged_step_mark_on_a_foreign_trace_changes_none_of_its_steps(span_file, tmp_path):
    def mark(span):
        span.setdefault("attributes", []).append({"key": "mas.step_index", "value": {"intValue": "0"}})

    (traj,) = load_spans(_edited(span_file, tmp_path / "marked.jsonl", mark)).trajectories
    (plain,) = load_spans(span_file).trajectories
    assert [s.content for s in traj.steps] == [s.content for s in plain.steps] and traj.n_steps == 7


def test_a_span_exported_twice_is_refused(span_file, tmp_path):
    bad = _edited(span_file, tmp_path / "twice.jsonl", lambda span: [json.loads(json.dumps(span))])
    with pytest.raises(UserError, match=r"twice.jsonl: trace \w+: span id \w+ occurs more than once"):
        load_spans(bad)


def _main(capsys, *args: str) -> tuple[int, str, str]:
    """``python main.py ARGS`` in this process (the imports are paid once): exit code, stdout, stderr."""
    import main

    capsys.readouterr()
    code = main.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@needs_who_and_when
def test_score_steps_and_predict_set_name_the_known_step_from_spans(span_file, tmp_path, capsys):
    ww = str(WHO_AND_WHEN / "algorithm_generated")
    cal_scores, scores, cal = tmp_path / "ww.jsonl", tmp_path / "spans.jsonl", tmp_path / "calibration.json"
    for args in (("score-steps", "--data-dir", ww, "--scorer", "learned", "--out", str(cal_scores)),
                 ("calibrate", "--scores", str(cal_scores), "--method", "rf", "--alpha", "0.2", "--out", str(cal)),
                 ("score-steps", "--spans", str(span_file), "--scorer", "learned", "--train-dir", ww,
                  "--out", str(scores))):
        code, _, err = _main(capsys, *args)
        assert code == 0, (args[0], err[-3000:])
    code, stdout, err = _main(capsys, "predict-set", "--calibration", str(cal), "--scores", str(scores))
    assert code == 0, err[-3000:]
    (row,) = [json.loads(line) for line in stdout.splitlines()]
    assert row["n_steps"] == 7 and row["covered"] is None  # no label in the spans
    assert MISTAKE_STEP in row["set"], row
    assert row["set_size"] < row["n_steps"], row  # the set points somewhere, not at the whole run
    # and the other attribution commands take the same input
    code, _, err = _main(capsys, "attribute", "--spans", str(span_file), "--method", "random",
                         "--out", str(tmp_path / "attr"))
    assert code == 0, err[-3000:]
    assert json.loads((tmp_path / "attr" / "results.json").read_text())["n_cases"] == 1
