"""Trace events: one typed class per event type, each with a typed payload (trace version 2).

A trace (``run_<r>.trace.jsonl``) holds one event per line. Every event has
the same envelope (who, when, tokens, latency, cost, the checkpoint it ran
from, its span) and a payload whose type depends on ``event_type`` and, for
``verify`` and ``finalize``, on ``payload.kind``:

============  ===============================================================
event_type    payload
============  ===============================================================
plan, act,    :class:`AgentOutput` (``kind="answer"``): an agent's answer
revise        artifact with its reasoning and confidence; a ``plan`` may also
              be :class:`PersonaAssignment` (generated personas)
tool_call     :class:`ToolCall`: the tool, its arguments, the call id
tool_result   :class:`ToolResult`: the tool's output and whether it succeeded
verify        :class:`AgentOutput` (a critic), :class:`Decision` (the
              termination controller), :class:`FinalVote` (the judge) or
              :class:`Election` (a group electing its representative)
finalize      :class:`AgentOutput` (an agent's final answer) or
              :class:`FinalAnswer` (a system actor publishes the run's answer)
error         :class:`ErrorInfo`: a failed call, a retry, a failed run
============  ===============================================================

The classes are joined as a discriminated union on ``event_type``
(:data:`TraceEvent`), as Inspect AI's event log is. Payloads allow keys they
do not declare, so a reader of this version reads a newer writer's lines;
version-1 lines (no ``payload.kind``, the model label as the extra
``gen_ai.request.model``) are upgraded on reading (:func:`upgrade_v1`).
Metric conventions are in ``descriptor/README.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError, field_validator

from descriptor.untrusted import parse_json

TRACE_VERSION = 2

EventType = Literal["plan", "act", "tool_call", "tool_result", "verify", "revise", "finalize", "error"]
EVENT_TYPES: tuple[str, ...] = ("plan", "act", "tool_call", "tool_result", "verify", "revise", "finalize", "error")


def is_system_actor(actor: str) -> bool:
    """System actors (controller, judge, mediator, runtime) are ``system`` or ``system:*``."""
    return actor == "system" or actor.startswith("system:")


# ---------------------------------------------------------------- payloads


class Send(BaseModel):
    """One directed message edge, recorded in the sender's event."""

    # Only the JSON key "from" (not the Python name "from_"): other tools read ``sends[i]["from"]``.
    model_config = ConfigDict(extra="allow", populate_by_name=False, defer_build=True)
    from_: str = Field(alias="from")
    """The sender (a system actor makes the edge system-mediated)."""
    to: str
    """The recipient actor."""


class InputMessage(BaseModel):
    """One message a model was given (``payload.input_messages``)."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    role: str
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str


class Payload(BaseModel):
    """What every payload may carry: its trajectory position, its messages, a redo flag."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    step_index: Annotated[int, Field(strict=True, ge=0)] | None = None
    """Position of an agent output in the run's trajectory (0, 1, 2, ... in trace order); None: not a step."""
    sends: list[Send] | None = None
    """Messages this event sends (directed edges)."""
    redo: bool | None = Field(default=None, strict=True)
    """True when the step redoes earlier work (a rollback's redone step, a revise after a critique)."""
    input_messages: list[InputMessage] | None = None
    """The messages the model call behind this event was given (only with ``tracing.record_inputs``)."""


class _AgentPayload(Payload):
    role: str
    """The agent's structural role (solver, debater, worker, planner, critic, aggregator, supervisor, ...)."""
    content: str = ""
    """What the agent's output said (the model's text, or its tool calls rendered), cut to 4000 characters."""
    persona: str | None = None
    """The persona specialising the agent within its role, if any."""
    round: int | None = None
    """Debate/delegation/exchange round the output belongs to."""
    cycle: int | None = None
    """Orchestrator cycle the output belongs to."""
    subtask: str | None = None
    """The subtask this agent was given (orchestrator workers)."""


class AgentOutput(_AgentPayload):
    """An agent's answer artifact (plan, act, revise, a critic's verify, an agent's finalize)."""

    kind: Literal["answer"] = "answer"
    answer_artifact: str
    """The answer itself."""
    confidence: float
    """The agent's stated confidence in [0, 1]."""
    reasoning: str = ""
    parse: str = "json"
    """How the answer was read from the reply: json, salvaged, tool_call_as_answer, cut_at_max_tokens (the reply
    ended at the token limit with no complete answer: no answer), boxed or fallback."""


class PersonaAssignment(Payload):
    """Generated personas (``mas.persona_mode = "generated"``): each agent's specialisation within its role."""

    kind: Literal["personas"] = "personas"
    personas: dict[str, str]
    """Agent -> persona (agents left out get none)."""
    content: str = ""
    error: str | None = None
    """Why no persona was assigned, when none was."""


class Handoff(BaseModel):
    """A routing tool call that hands the task to other agents."""

    model_config = ConfigDict(extra="allow", populate_by_name=False, defer_build=True)
    from_: str = Field(alias="from")
    to: list[str]


class ToolCall(_AgentPayload):
    """An agent asks for a tool (or a handoff)."""

    kind: Literal["tool_call"] = "tool_call"
    tool: str
    arguments: dict[str, Any]
    tool_call_id: str | None = None
    tool_protocol: Literal["native", "text"] | None = None
    """``native``: the provider's tool_calls; ``text``: a JSON block in the reply."""
    handoff: Handoff | None = None


class ToolResult(Payload):
    """What a tool returned to the agent that called it."""

    kind: Literal["tool_result"] = "tool_result"
    tool: str
    ok: bool = Field(strict=True)
    """False when the tool failed (bad arguments, an error); the agent sees the error text."""
    output: str
    tool_call_id: str | None = None
    tool_protocol: Literal["native", "text"] | None = None
    state_changing: bool | None = None
    """True when an accepted call of a tool that changes the run's environment (WorkBench's side-effect tools);
    None for tools without an environment."""


class Decision(Payload):
    """One termination-controller decision after a round of a looped stage (see mas.topologies.termination)."""

    kind: Literal["termination"] = "termination"
    stage: str
    round: int
    max_rounds: int
    min_rounds: int = 0
    stop: bool
    reason: str | None = None
    """One of the four stop reasons when ``stop``; None when the loop continues."""
    reason_detail: str = ""
    held_back: str | None = None
    consensus_mode: str = "lexical"
    consensus_source: str = "none"
    """``llm_judge``, ``lexical``, ``lexical_fallback`` (judge unusable) or ``none`` (not evaluated)."""
    consensus_ratio: float = 0.0
    """Winner group size / ``consensus_valid_count``."""
    consensus_valid_count: int | None = None
    """Answers voted on minus the judge's ``invalid_indices`` (and empty ones): the consensus denominator."""
    consensus_groups: list[list[str]] = Field(default_factory=list)
    consensus_answer: str | None = None
    consensus_explanation: str = ""
    # Diagnostics only, when the judge decided (its grouping decides): the agent groups an exact match of
    # normalised answers gives, and their winner's share over the valid answers of ``consensus_ratio``.
    lexical_groups: list[list[str]] | None = None
    lexical_ratio: float | None = None
    is_substantive: bool | None = None
    progress_source: str = "none"
    progress_status: str | None = None
    expected_improvement: str | None = None
    progress_explanation: str = ""
    should_stop_for_no_progress: bool | None = None
    average_confidence: float = 0.0
    mean_delta: float | None = None
    valid_artifact_count: int = 0
    expected_count: int = 0
    required_valid: int = 0
    judge_error: str | None = None
    judge_token_in: int = 0
    judge_token_out: int = 0
    judge_latency_ms: float = 0.0
    judge_cost_usd: float = 0.0
    # The judge call's model, route and the source of its token counts (None: no call was made).
    judge_model: str | None = None
    judge_route: str | None = None
    judge_usage_source: Literal["provider", "tokenizer", "estimate"] | None = None


class Vote(Payload):
    """What a vote among candidates records, by the judge or lexical (:mod:`descriptor.judge_audit` reads it)."""

    vote_source: str
    """``llm_judge``, ``lexical`` or ``lexical_fallback``."""
    groups: list[list[str]]
    """Agent names per answer group (the judge's grouping)."""
    invalid_indices: list[int] = Field(default_factory=list)
    explanation: str = ""  # the judge's words, numbering the candidates as it saw them (``shown_order``)
    judge_error: str | None = None
    answer_groups: list[list[int]] = Field(default_factory=list)
    """Candidates with equal normalised answers (the lexical grouping; empty in older traces)."""
    shown_order: list[int] | None = None  # the order the judge model saw them in (None: no judge model saw them)


class FinalVote(Vote):
    """The final vote among candidates (by the judge, or lexical)."""

    kind: Literal["final_vote"] = "final_vote"
    winner_index: int
    winner_agent: str
    candidates: list[str] = Field(default_factory=list)
    """The candidates' agents, whose places the indices here name (empty in older traces)."""


class Election(Vote):
    """A group elects its representative (``representative_exchange``), by its judge or by a lexical vote; the
    candidates are ``members``, in that order."""

    kind: Literal["election"] = "election"
    group: int
    members: list[str]
    elected: str
    """The member whose answer (and environment) the group's representative takes over."""
    representative: str
    """The actor that speaks for the group in the exchange (``representative_<group>``)."""


class FinalAnswer(Payload):
    """A system actor publishes the run's answer (the vote's winner, the aggregate)."""

    kind: Literal["final_answer"] = "final_answer"
    answer_artifact: str
    confidence: float
    reasoning: str = ""
    source_agent: str
    """The agent whose artifact this is."""
    selection: str
    """How it was chosen (``llm_judge``, ``lexical``, ``aggregator``, ...)."""
    content: str = ""
    cycle: int | None = None
    outcome_environment: str | None = None
    """On a benchmark solved by acting: the branch whose environment is the run's outcome (an agent's name, or
    ``main``); None otherwise."""


class ErrorInfo(Payload):
    """Something failed: a model call (retried or not), a run, a rollback."""

    kind: str
    """``llm_call``, ``embedded_server_down``, ``run_failed`` (an infrastructure error ended the run),
    ``system_failure`` or ``prompt_too_long`` (the system's own failure ended it), ``rollback_failed``, ..."""
    error: str
    contract: str | None = None
    """The prompt contract of a failed model call."""
    attempt: int | None = None
    will_retry: bool | None = None
    cause: str | None = None


# ---------------------------------------------------------------- events


class Event(BaseModel):
    """The envelope every event shares: who did what, when, and what it cost."""

    # Numbers are strict (no "5", 5.0 or true for an int): a trace is data other tools recompute from;
    # an int is accepted as a float.
    model_config = ConfigDict(extra="allow", defer_build=True)
    version: int = Field(default=TRACE_VERSION, strict=True)
    """Schema version of this line (1 or 2)."""
    run_id: str = ""
    """The run this event belongs to."""
    seq: int = Field(default=0, ge=0, strict=True)
    """0-based position of the event in its trace file."""
    timestamp_start: str
    """ISO-8601 UTC time the step started."""
    timestamp_end: str
    """ISO-8601 UTC time the step ended."""
    actor: str
    """Agent, tool or system actor that produced the event."""
    event_type: EventType
    token_in: int = Field(default=0, ge=0, strict=True)
    """Prompt tokens of the LLM call behind this event (tokens)."""
    token_out: int = Field(default=0, ge=0, strict=True)
    """Completion tokens of the LLM call behind this event (tokens)."""
    latency_ms: float = Field(default=0.0, ge=0, strict=True)
    """Wall time of the step (ms)."""
    cost_usd: float = Field(default=0.0, ge=0, strict=True)
    """Price of the LLM call behind this event (USD)."""
    state_id: str | None = None
    """Top-level graph checkpoint this step ran from (its resumable point)."""
    model: str | None = None
    """Label of the model behind an LLM-backed event (OpenTelemetry ``gen_ai.request.model``)."""
    route: str | None = None
    """The route (``default``, ``judge``, ...) of an LLM-backed event's call; None in older traces."""
    usage_source: Literal["provider", "tokenizer", "estimate"] | None = None
    """Where token counts came from: the endpoint's usage, the server's tokenizer, or characters/4."""
    cache_hit: bool | None = None
    """A reply from the response cache (no request sent; original tokens, ``cost_usd`` 0; see ``cost_usd_saved``)."""
    cost_usd_saved: float | None = Field(default=None, ge=0)
    """Price of the original call a cache hit did not pay again (USD)."""
    span_id: str | None = None
    """This event's span (16 hex digits, OpenTelemetry's format)."""
    parent_span_id: str | None = None
    """The span it ran inside (the graph node or agent turn; the run's root span for those)."""

    @field_validator("timestamp_start", "timestamp_end")
    @classmethod
    def _iso(cls, v: str) -> str:
        if datetime.fromisoformat(v).utcoffset() != timedelta(0):
            raise ValueError(f"expected an ISO-8601 UTC timestamp (offset +00:00 or Z), got {v!r}")
        return v

    @property
    def step_index(self) -> int | None:
        """The trajectory position of this event (None: not a trajectory step)."""
        return self.payload.step_index  # type: ignore[attr-defined]


class PlanEvent(Event):
    event_type: Literal["plan"] = "plan"
    payload: Annotated[Annotated[AgentOutput, Tag("answer")] | Annotated[PersonaAssignment, Tag("personas")],
                       _kind("answer")]


class ActEvent(Event):
    event_type: Literal["act"] = "act"
    payload: AgentOutput


class ReviseEvent(Event):
    event_type: Literal["revise"] = "revise"
    payload: AgentOutput


class ToolCallEvent(Event):
    event_type: Literal["tool_call"] = "tool_call"
    payload: ToolCall


class ToolResultEvent(Event):
    event_type: Literal["tool_result"] = "tool_result"
    payload: ToolResult


def _kind(default: str) -> Any:
    def tag(value: Any) -> str:
        kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
        return kind if isinstance(kind, str) else default

    return Discriminator(tag)


class VerifyEvent(Event):
    event_type: Literal["verify"] = "verify"
    payload: Annotated[Annotated[AgentOutput, Tag("answer")] | Annotated[Decision, Tag("termination")]
                       | Annotated[FinalVote, Tag("final_vote")] | Annotated[Election, Tag("election")],
                       _kind("answer")]


class FinalizeEvent(Event):
    event_type: Literal["finalize"] = "finalize"
    payload: Annotated[Annotated[AgentOutput, Tag("answer")] | Annotated[FinalAnswer, Tag("final_answer")],
                       _kind("answer")]


class ErrorEvent(Event):
    event_type: Literal["error"] = "error"
    payload: ErrorInfo


TraceEvent = Annotated[PlanEvent | ActEvent | ReviseEvent | ToolCallEvent | ToolResultEvent | VerifyEvent
                       | FinalizeEvent | ErrorEvent, Field(discriminator="event_type")]
"""Any trace event, discriminated on ``event_type``."""

_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceEvent, config=ConfigDict(defer_build=True))


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 line as version-2 data: ``payload.kind`` added, ``gen_ai.request.model`` renamed ``model``.

    Version 1 told a system's published answer from an agent's by its actor,
    and a controller decision from a final vote by ``payload.kind``.
    """
    data = dict(data)
    payload = dict(data.get("payload") or {})
    et, actor = data.get("event_type"), str(data.get("actor", ""))
    if "kind" not in payload:
        if et == "verify":
            payload["kind"] = "termination" if "stop" in payload else "answer"
        elif et == "finalize":
            payload["kind"] = "final_answer" if is_system_actor(actor) else "answer"
        elif et in ("plan", "act", "revise"):
            payload["kind"] = "answer"
        elif et in ("tool_call", "tool_result"):
            payload["kind"] = et
    if et == "error" and "kind" not in payload:
        payload["kind"] = "unknown"
    data["payload"] = payload
    if "gen_ai.request.model" in data:
        data.setdefault("model", data.pop("gen_ai.request.model"))
    return data


def parse_event(data: dict[str, Any]) -> Event:
    """Validate one event (any version) into its typed class; raises ``pydantic.ValidationError``."""
    if data.get("version", TRACE_VERSION) == 1:
        data = upgrade_v1(data)
    return _ADAPTER.validate_python(data)


def event_line(event: Event) -> str:
    """The trace line of ``event``: its JSON without ``None`` fields."""
    return event.model_dump_json(exclude_none=True, by_alias=True)


class TraceReadError(ValueError):
    """A trace line that is not valid JSON or not a valid event."""


def iter_trace_lines(path: str | Path) -> Iterator[tuple[int, Event | None, str | None]]:
    """Yield ``(line number, event or None, error or None)`` for every non-blank line."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                # pydantic-core parses and validates a version-2 line in one pass (a third of json.loads plus
                # validation); a version-1 line is read as data and upgraded first.
                if '"version":1,' in line[:16]:
                    data = parse_json(line)
                    if not isinstance(data, dict):
                        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
                    yield lineno, parse_event(data), None
                else:
                    yield lineno, _ADAPTER.validate_json(line), None
            except (ValueError, ValidationError) as err:  # JSONDecodeError is a ValueError
                yield lineno, None, f"invalid trace line: {str(err).splitlines()[0]}"


@dataclass(kw_only=True, frozen=True, slots=True)
class TraceDamage:
    """A damaged trace line: its 1-based number, the message, and whether it is ``fatal`` (False only for damage
    confined to the last line, a run that crashed mid-write: the prefix is usable)."""

    line: int
    message: str
    fatal: bool


def read_trace_checked(path: str | Path) -> tuple[list[Event] | None, list[TraceDamage]]:
    """The trace's events under the one damage rule, and the damage met.

    A damaged *last* line only (a crash mid-write) leaves the valid prefix
    usable; damage anywhere else makes the trace untrustworthy (``None``).
    """
    rows = list(iter_trace_lines(path))
    bad = [(n, err) for n, _ev, err in rows if err is not None]
    if not bad:
        return [ev for _, ev, _ in rows], []  # type: ignore[misc]
    if len(bad) == 1 and bad[0][0] == rows[-1][0]:
        return [ev for _, ev, err in rows if err is None], [TraceDamage(line=bad[0][0], message=bad[0][1], fatal=False)]
    return None, [TraceDamage(line=n, message=err, fatal=True) for n, err in bad]


def read_trace(path: str | Path, *, strict: bool = True) -> list[Event]:
    """Read and validate a JSONL trace; :class:`TraceReadError` names the file and the first damaged line.

    With ``strict=False`` a damaged last line is dropped (see :func:`read_trace_checked`).
    """
    events, damage = read_trace_checked(path)
    if events is None or (damage and strict):
        raise TraceReadError(f"{path}:{damage[0].line}: {damage[0].message}")
    return events
