"""Issue 4, "what must show": one scripted `main.py run` of every registered system on arith.

Every MAS trace must have messages (``payload.sends``), handoffs (an actor
switch between non-system actors) and a controller decision that stops for
one of the four reasons.
"""

from pathlib import Path

from descriptor.events import is_system_actor, read_trace
from main import main
from mas.systems import SYSTEMS
from mas.topologies import pictures as graph_pictures
from mas.topologies.termination import STOP_REASONS

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "config" / "experiment.example.toml")
MAS_SYSTEMS = tuple(s for s in SYSTEMS if not SYSTEMS[s].single_agent)


def has_handoff(events) -> bool:
    """Two consecutive non-system events by different actors (the descriptor's handoff definition)."""
    actors = [e.actor for e in events if not is_system_actor(e.actor)]
    return any(a != b for a, b in zip(actors, actors[1:], strict=False))


def test_all_systems_run_and_every_mas_trace_shows_sends_handoffs_and_a_stop_reason(tmp_path, monkeypatch):
    # matplotlib would take longer than the 24 runs; the pictures have their own test in test_topologies
    monkeypatch.setattr(graph_pictures, "draw_png", lambda edges, path, *args, **kwargs: path)
    code = main(["run", "--config", CONFIG, "--benchmark", "arith", "--systems", ",".join(SYSTEMS),
                 "--model", "scripted", "--task-limit", "3", "--runs-per-task", "2", "--output-root", str(tmp_path),
                 "--experiment-id", "all"])
    assert code == 0
    root = tmp_path / "all" / "arith"
    assert len(list((root / "sas").glob("*/run_*.result.json"))) == 6  # the baseline ran too
    for system in MAS_SYSTEMS:
        traces = sorted((root / system).glob("*/run_*.trace.jsonl"))
        assert len(traces) == 6, system  # 3 tasks x 2 runs
        for path in traces:
            events = read_trace(path)
            where = f"{system}/{path.parent.name}/{path.name}"
            assert any(getattr(e.payload, "sends", None) for e in events), f"no sends in {where}"
            assert has_handoff(events), f"no handoff in {where}"
            stops = [getattr(e.payload, "reason", None) for e in events
                     if e.actor == "system:controller" and e.event_type == "verify"]
            assert any(r in STOP_REASONS for r in stops), f"no controller stop in {where}"
