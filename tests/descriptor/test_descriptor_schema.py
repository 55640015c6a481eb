"""The trace line contract against the independent verifier (scripts/verify_descriptor.py).

The verifier checks the envelope and the payload keys the metrics read; the typed events
(descriptor/events.py) check every payload field too. So every line the schema accepts the verifier
accepts, and a line whose envelope or metric keys are wrong is rejected by both.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from descriptor.events import parse_event
from tests.descriptor_fixtures import ev
from tests.scripts_loader import load_script

valid_event = load_script("verify_descriptor").valid_event


def schema_accepts(obj: dict[str, Any]) -> bool:
    try:
        parse_event(obj)
    except (ValidationError, AttributeError, TypeError):
        return False
    return True


def line(**changes: Any) -> dict[str, Any]:
    """A valid agent event with ``changes`` applied (a value of ``...`` drops the key)."""
    base = ev("solver", "act", tin=5, tout=2, ms=2.5, usd=1e-6, content="x",
              sends=[{"from": "solver", "to": "critic"}])
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not ...}


VALID = {
    "full": line(),
    "int latency and cost": line(latency_ms=3, cost_usd=0),
    "defaults omitted": line(token_in=..., token_out=..., latency_ms=..., cost_usd=..., seq=..., version=...,
                             run_id=..., state_id=...),
    "state id": line(state_id="1ef-abc"),
    "extra keys": line(**{"gen_ai.request.model": "m"}),
    "extra send keys": line(payload={**line()["payload"], "sends": [{"from": "a", "to": "b", "kind": "reply"}]}),
}
INVALID = {
    "token_in as text": line(token_in="5"),
    "token_in as float": line(token_in=5.0),
    "token_out as bool": line(token_out=True),
    "token_in negative": line(token_in=-1),
    "latency as text": line(latency_ms="2.5"),
    "latency as bool": line(latency_ms=True),
    "cost as text": line(cost_usd="0.1"),
    "cost negative": line(cost_usd=-0.1),
    "seq negative": line(seq=-1),
    "seq as text": line(seq="1"),
    "seq as float": line(seq=1.0),
    "version as text": line(version="1"),
    "run_id not text": line(run_id=5),
    "state_id not text": line(state_id=3),
    "actor not text": line(actor=1),
    "unknown event type": line(event_type="think"),
    "bad timestamp": line(timestamp_start="yesterday"),
    "timestamp without a zone": line(timestamp_start="2026-01-01T10:00:00"),
    "timestamp not UTC": line(timestamp_end="2026-01-01T10:00:00+02:00"),
    "payload not an object": line(payload=[1]),
    "sends not a list": line(payload={**line()["payload"], "sends": {"from": "a", "to": "b"}}),
    "send from not text": line(payload={**line()["payload"], "sends": [{"from": 1, "to": "b"}]}),
    "send to missing": line(payload={**line()["payload"], "sends": [{"from": "a"}]}),
    "send to null": line(payload={**line()["payload"], "sends": [{"from": "a", "to": None}]}),
    "send keyed from_": line(payload={**line()["payload"], "sends": [{"from_": "a", "to": "b"}]}),
    "payload.ok not bool": ev("tool:calc", "tool_result", ok="yes"),
    "payload.redo not bool": line(payload={**line()["payload"], "redo": 1}),
}


@pytest.mark.parametrize("name", VALID)
def test_both_accept(name):
    assert schema_accepts(VALID[name]) and valid_event(VALID[name]) is None


@pytest.mark.parametrize("name", INVALID)
def test_both_reject(name):
    assert not schema_accepts(INVALID[name])
    assert valid_event(INVALID[name]) is not None


def test_int_latency_is_read_as_float():
    event = parse_event(line(latency_ms=3, cost_usd=0))
    assert isinstance(event.latency_ms, float) and isinstance(event.cost_usd, float)
