"""Failed runs of any agent framework, from their OpenTelemetry spans, as :class:`Trajectory` objects.

Reads what backends and collectors write:

- **OTLP JSON**: the OpenTelemetry Collector's file exporter (one
  ``ExportTraceServiceRequest`` per line, ``{"resourceSpans": [...]}``), or one
  such object in a ``.json`` file;
- **Phoenix's span export**: ``GET /v1/projects/<project>/spans``
  (``{"data": [spans]}``, one page or a list of pages), the spans as a JSON
  list, or one span per line (``context.trace_id``, ``parent_id``, ``span_kind``).

Each trace is one trajectory (id ``<file stem>/<trace id>``). Its steps are
the model calls, in start order: OpenInference ``LLM`` spans or GenAI
``chat`` spans (``gen_ai.operation.name``). A step's agent is the span's
``gen_ai.agent.name``, else the LangGraph node in its ``metadata``
(``langgraph_node``), else the nearest ``AGENT`` (or ``invoke_agent``)
ancestor, else the node span under the root, else ``llm``; its content is the
model's output message (text and tool calls), else ``output.value``. A
``TOOL`` / ``execute_tool`` span's output is appended to the latest step
before it by the same agent, as this project's own tool results are. The
query is the root span's input (``question``, ``query``, ``input``, ``task``
or the first message), else the first user message of the first call; the
final answer is the root's output. Spans this project exported itself mark
their trajectory steps (``mas.step_index``); in a trace whose root says it is
such an export (``mas.run_id``) only those calls are steps, as in the JSONL,
and anywhere else the marks are ignored (one forged mark on a foreign trace
made its other calls vanish). A trace with two spans of one id is refused.
Spans carry no labels: ``mistake_step`` and ``mistake_agent`` are None.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attribution.sources.load_result import LoadResult, MalformedFile, SkippedFile
from attribution.sources.trajectory import Step, Trajectory
from descriptor.errors import UserError
from descriptor.untrusted import BadJson, parse_index, parse_json
from mas.logging import get_logger

log = get_logger(__name__)

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_RESULT_CHARS = 2000  # tool output kept per step (characters), as for this project's own runs
_QUERY_KEYS = ("question", "query", "input", "task", "prompt")
_ANSWER_KEYS = ("answer", "final_answer", "output", "result")


@dataclass(kw_only=True, slots=True)
class RawSpan:
    """One span, whatever format it came in."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    """OpenInference span kind (LLM, TOOL, AGENT, CHAIN, ...), derived from GenAI attributes if absent."""
    start_ns: int
    attributes: dict[str, Any]
    children: list[RawSpan] = field(default_factory=list)


# ---------------------------------------------------------------- reading


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedFile(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _array(value: Any, where: str) -> list[Any]:
    """A list field (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedFile(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _ident(value: Any, size: int, where: str) -> str:
    """A trace or span id as lowercase hex: OTLP JSON writes hex, protobuf-to-JSON writes base64."""
    if not isinstance(value, str) or not value:
        raise MalformedFile(f"{where}: expected a hex or base64 id, got {_short(value)}")
    if len(value) == 2 * size and _HEX.match(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise MalformedFile(f"{where}: expected a {2 * size}-digit hex id, got {_short(value)}")
    return raw.hex()


def _any_value(v: Any, where: str) -> Any:
    """An OTLP JSON ``AnyValue`` (int64 as a string, arrays and key-value lists nested)."""
    if not isinstance(v, dict) or not v:
        return None
    key, val = next(iter(v.items()))
    if key in ("intValue", "doubleValue"):
        try:
            return int(val) if key == "intValue" else float(val)
        except (TypeError, ValueError, OverflowError):
            raise MalformedFile(f"{where}.{key}: expected a number, got {_short(val)}") from None
    if key == "arrayValue":
        values = _array(_object(val, f"{where}.arrayValue").get("values"), f"{where}.arrayValue.values")
        return [_any_value(x, f"{where}.arrayValue.values[{i}]") for i, x in enumerate(values)]
    if key == "kvlistValue":
        return _key_values(_object(val, f"{where}.kvlistValue").get("values"), f"{where}.kvlistValue.values")
    return val


def _key_values(kvs: Any, where: str) -> dict[str, Any]:
    """OTLP JSON attributes (``[{"key": ..., "value": AnyValue}]``) as a dict."""
    out = {}
    for i, kv in enumerate(_array(kvs, where)):
        kv = _object(kv, f"{where}[{i}]")
        if not isinstance(kv.get("key"), str):
            raise MalformedFile(f"{where}[{i}].key: expected a string, got {_short(kv.get('key'))}")
        out[kv["key"]] = _any_value(kv.get("value"), f"{where}[{i}].value")
    return out


def _flatten(attrs: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, f"{key}."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                out.update(_flatten(x, f"{key}.{i}."))
        else:
            out[key] = v
    return out


def _kind(attrs: dict[str, Any], given: str | None = None) -> str:
    kind = given or attrs.get("openinference.span.kind")
    if isinstance(kind, str) and kind and kind.upper() != "UNKNOWN":
        return kind.upper()
    op = attrs.get("gen_ai.operation.name")
    return {"chat": "LLM", "text_completion": "LLM", "generate_content": "LLM", "execute_tool": "TOOL",
            "invoke_agent": "AGENT", "create_agent": "AGENT"}.get(str(op), "UNKNOWN")


def _ns(value: Any, where: str) -> int:
    """A time as ns since the epoch: a number, a string of ASCII digits, or ISO-8601."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, str) and value.isascii() and value.isdigit():
            return int(value)
        if isinstance(value, str):
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
            dt = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
            return int(dt.timestamp() * 1_000_000) * 1000
    except (ValueError, OverflowError):  # NaN, infinity, a date out of range, 5000 digits
        pass
    raise MalformedFile(f"{where}: expected a time (ns since the epoch or ISO-8601), got {_short(value)}")


def _otlp_spans(obj: dict[str, Any], where: str) -> Iterator[RawSpan]:
    n = 0  # spans are named by their position in the document (span 0, span 1, ...)
    resource_spans = _array(obj.get("resourceSpans") or obj.get("resource_spans"), f"{where}: resourceSpans")
    for r, rs in enumerate(resource_spans):
        at_r = f"{where}: resourceSpans[{r}]"
        rs = _object(rs, at_r)
        scopes = rs.get("scopeSpans") or rs.get("scope_spans") or rs.get("instrumentationLibrarySpans")
        for k, ss in enumerate(_array(scopes, f"{at_r}.scopeSpans")):
            at_s = f"{at_r}.scopeSpans[{k}]"
            for s in _array(_object(ss, at_s).get("spans"), f"{at_s}.spans"):
                at = f"{where}: span {n}"
                n += 1
                s = _object(s, at)
                attrs = _flatten(_key_values(s.get("attributes"), f"{at}.attributes"))
                parent = s.get("parentSpanId") or s.get("parent_span_id")
                yield RawSpan(trace_id=_ident(s.get("traceId") or s.get("trace_id"), 16, f"{at}.traceId"),
                              span_id=_ident(s.get("spanId") or s.get("span_id"), 8, f"{at}.spanId"),
                              parent_id=_ident(parent, 8, f"{at}.parentSpanId") if parent else None,
                              name=str(s.get("name", "")), kind=_kind(attrs),
                              start_ns=_ns(s.get("startTimeUnixNano") or s.get("start_time_unix_nano") or 0,
                                           f"{at}.startTimeUnixNano"),
                              attributes=attrs)


def _phoenix_span(s: Any, where: str) -> RawSpan:
    s = _object(s, where)
    ctx = s.get("context")
    if not isinstance(ctx, dict):
        raise MalformedFile(f"{where}: field 'context': expected an object with trace_id and span_id")
    attrs = s.get("attributes") or {}
    attrs = _flatten(_object(attrs, f"{where}.attributes"))
    parent = s.get("parent_id")
    return RawSpan(trace_id=_ident(ctx.get("trace_id"), 16, f"{where}.context.trace_id"),
                   span_id=_ident(ctx.get("span_id"), 8, f"{where}.context.span_id"),
                   parent_id=_ident(parent, 8, f"{where}.parent_id") if parent else None,
                   name=str(s.get("name", "")), kind=_kind(attrs, s.get("span_kind")),
                   start_ns=_ns(s.get("start_time"), f"{where}.start_time"), attributes=attrs)


def _spans_of(obj: Any, where: str) -> Iterator[RawSpan]:
    if isinstance(obj, list):
        for i, x in enumerate(obj):
            yield from _spans_of(x, f"{where}[{i}]")
    elif isinstance(obj, dict) and ("resourceSpans" in obj or "resource_spans" in obj):
        yield from _otlp_spans(obj, where)
    elif isinstance(obj, dict) and isinstance(obj.get("data"), list):
        for i, s in enumerate(obj["data"]):
            yield _phoenix_span(s, f"{where}: data[{i}]")
    elif isinstance(obj, dict) and "context" in obj:
        yield _phoenix_span(obj, where)
    else:
        raise MalformedFile(f"{where}: expected OTLP JSON (resourceSpans) or Phoenix spans (data / context)")


def read_span_file(path: str | Path) -> list[RawSpan]:
    """Every span of a JSON or JSON-lines file (OTLP JSON or Phoenix's export)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise MalformedFile(f"{path}: cannot read: {err}") from None
    try:
        docs = [parse_json(text)]
    except BadJson:
        docs = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    docs.append(parse_json(line))
                except BadJson as err:
                    raise MalformedFile(f"{path}:{n}: not valid JSON: {err}") from None
    spans: list[RawSpan] = []
    for i, doc in enumerate(docs):
        spans.extend(_spans_of(doc, f"{path}" if len(docs) == 1 else f"{path}:{i + 1}"))
    return spans


# ---------------------------------------------------------------- spans -> trajectory


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_json(value)
        except BadJson:
            return value
    return value


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else empty (an attribute of another type than expected is ignored)."""
    return value if isinstance(value, list) else []


def _text_of(value: Any, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` in a (JSON) value, or the content of its first/last message."""
    value = _json(value)
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        for k in keys:
            if isinstance(value.get(k), str | int | float) and str(value[k]).strip():
                return str(value[k])
        msgs = value.get("messages")
        if isinstance(msgs, list) and msgs:
            m = msgs[0] if "question" in keys else msgs[-1]
            content = m.get("content") if isinstance(m, dict) else None
            if content is None and isinstance(m, dict) and isinstance(m.get("kwargs"), dict):
                content = m["kwargs"].get("content")
            return str(content) if content else None
    return None


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.<i>.<rest>`` attributes grouped by ``i``, in order."""
    rows: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            head, _, rest = key[len(prefix) + 1:].partition(".")
            if (i := parse_index(head)) is not None:
                rows.setdefault(i, {})[rest] = value
    return [rows[i] for i in sorted(rows)]


def _output_of(span: RawSpan) -> str:
    a = span.attributes
    parts = []
    for msg in _indexed(a, "llm.output_messages"):
        if msg.get("message.content"):
            parts.append(str(msg["message.content"]))
        for call in _indexed(msg, "message.tool_calls"):
            parts.append(f"{call.get('tool_call.function.name', '?')}({call.get('tool_call.function.arguments', '')})")
    if not parts and isinstance(a.get("gen_ai.output.messages"), str):
        for msg in _list(_json(a["gen_ai.output.messages"])):
            for part in _list(msg.get("parts")) if isinstance(msg, dict) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    parts.append(str(part.get("content", "")))
                elif part.get("type") == "tool_call":
                    parts.append(f"{part.get('name')}({json.dumps(part.get('arguments'))})")
    if not parts and a.get("mas.content"):
        parts.append(str(a["mas.content"]))
    if not parts and a.get("output.value") is not None:
        parts.append(_text_of(a["output.value"], _ANSWER_KEYS) or str(a["output.value"]))
    return "\n".join(parts)


def _first_user_message(span: RawSpan) -> str | None:
    for msg in _indexed(span.attributes, "llm.input_messages"):
        if msg.get("message.role") == "user" and msg.get("message.content"):
            return str(msg["message.content"])
    for msg in _list(_json(span.attributes.get("gen_ai.input.messages"))):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return " ".join(str(p.get("content", "")) for p in _list(msg.get("parts")) if isinstance(p, dict))
    return None


def _node_of(span: RawSpan) -> str | None:
    meta = _json(span.attributes.get("metadata"))
    if isinstance(meta, dict) and isinstance(meta.get("langgraph_node"), str):
        return meta["langgraph_node"]
    return None


def _check_parents(by_id: dict[str, RawSpan], where: str) -> None:
    """Raise :class:`MalformedFile` when a span is its own ancestor: walking up from it would never end, and
    the spans of such a loop have no root. Without one, every chain of parents ends at a root."""
    reaches_root: set[str] = set()
    for start in by_id:
        chain: list[str] = []
        on_chain: set[str] = set()
        sid: str | None = start
        while sid in by_id and sid not in reaches_root:
            if sid in on_chain:
                loop = [*chain[chain.index(sid):], sid]
                what = "its own parent" if len(loop) == 2 else "its own ancestor (" + " -> ".join(loop) + ")"
                raise MalformedFile(f"{where}: field 'parent': span {sid} is {what}")
            chain.append(sid)
            on_chain.add(sid)
            sid = by_id[sid].parent_id
        reaches_root.update(chain)


class _Trace:
    def __init__(self, spans: list[RawSpan], where: str) -> None:
        self.by_id = {s.span_id: s for s in spans}
        if len(self.by_id) != len(spans):  # a span exported twice would be read as two steps
            seen: set[str] = set()
            dup = next(s.span_id for s in spans if s.span_id in seen or seen.add(s.span_id))
            raise MalformedFile(f"{where}: span id {dup} occurs more than once; expected one span per id")
        _check_parents(self.by_id, where)
        for s in spans:
            if s.parent_id in self.by_id:
                self.by_id[s.parent_id].children.append(s)
        roots = [s for s in spans if s.parent_id not in self.by_id]
        self.root = min(roots, key=lambda s: s.start_ns)

    def ancestors(self, span: RawSpan) -> Iterator[RawSpan]:
        while span.parent_id in self.by_id:
            span = self.by_id[span.parent_id]
            yield span

    def agent_of(self, span: RawSpan) -> str:
        a = span.attributes
        if isinstance(a.get("gen_ai.agent.name"), str):
            return a["gen_ai.agent.name"]
        if node := _node_of(span):
            return node
        chain = list(self.ancestors(span))
        for anc in chain:
            if anc.kind == "AGENT":
                return str(anc.attributes.get("gen_ai.agent.name") or anc.name)
        below_root = [anc for anc in chain if anc.parent_id == self.root.span_id]
        return below_root[0].name if below_root else "llm"


def trace_trajectory(spans: list[RawSpan], traj_id: str, source: str) -> Trajectory:
    """One trace's spans as a trajectory (see the module docstring)."""
    trace = _Trace(spans, f"{source}: trace {spans[0].trace_id}")
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    # This project's own spans mark trajectory steps (judge calls behind decisions and votes are no steps); the
    # marks are read only in a trace whose root says it is the project's export.
    own = "mas.run_id" in trace.root.attributes and any("mas.step_index" in s.attributes for s in spans)
    rows: list[dict[str, Any]] = []
    for s in ordered:
        if s.kind == "LLM" and (not own or "mas.step_index" in s.attributes):
            rows.append({"agent": trace.agent_of(s), "content": _output_of(s),
                         "kind": "tool_call" if any(".tool_calls." in k for k in s.attributes) else "llm",
                         "span": s})
        elif s.kind == "TOOL" and rows:
            agent = trace.agent_of(s)
            target = next((r for r in reversed(rows) if r["agent"] == agent), rows[-1])
            out = s.attributes.get("output.value", s.attributes.get("gen_ai.tool.call.result", ""))
            text = str(_json(out) if not isinstance(_json(out), dict | list) else json.dumps(_json(out)))
            text = text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " …"
            name = s.attributes.get("tool.name") or s.attributes.get("gen_ai.tool.name") or s.name
            target["content"] += f"\n-> tool result ({name}): {text}"
    if not rows:
        raise MalformedFile(f"{source}: trace {spans[0].trace_id}: no model call (LLM or chat span) to make a step of")
    root = trace.root
    query = _text_of(root.attributes.get("input.value"), _QUERY_KEYS) or _first_user_message(rows[0]["span"]) or ""
    answer = _text_of(root.attributes.get("output.value"), _ANSWER_KEYS)
    steps = [Step(index=i, agent=r["agent"], content=r["content"], kind=r["kind"]) for i, r in enumerate(rows)]
    return Trajectory(id=traj_id, subset="spans", query=query, final_answer=answer, steps=steps, source_path=source)


def load_span_file(path: str | Path) -> list[Trajectory]:
    """Every trace of one span file, as trajectories (in order of first appearance)."""
    path = Path(path)
    spans = read_span_file(path)
    if not spans:
        raise MalformedFile(f"{path}: no spans")
    traces: dict[str, list[RawSpan]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    return [trace_trajectory(ts, f"{path.stem}/{tid}", str(path)) for tid, ts in traces.items()]


def load_spans(source: str | Path) -> LoadResult:
    """Trajectories of a span file, or of every ``*.json``/``*.jsonl`` file in a directory (bad ones skipped)."""
    root = Path(source)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted([*root.glob("*.json"), *root.glob("*.jsonl")])
    else:
        raise UserError(f"--spans {root}: file or directory not found")
    out: list[Trajectory] = []
    skipped: list[SkippedFile] = []
    for f in files:
        try:
            out.extend(load_span_file(f))
        except MalformedFile as err:
            if root.is_file():
                raise UserError(str(err)) from None
            reason = str(err).splitlines()[0]
            log.warning("skipped span file", path=str(f), reason=reason)
            skipped.append(SkippedFile(path=str(f), reason=reason))
    return LoadResult(trajectories=out, skipped=skipped)
