"""The response cache (issue 28), through the CLI against a fake endpoint that counts requests: a second identical
sweep sends nothing, answers and token counts equal the first's, every call is traced as a hit with the money it
saved, and repeated runs of one task keep their own replies unless asked to share them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from mas.study_settings import CacheSettings
from mas.llm.cache import CachedReply, CacheUse, ResponseCache, request_key
from tests.fake_endpoint import Reply, answer, prompt_text

ROOT = Path(__file__).resolve().parents[2]


def reply_by_prompt(n: int, request: dict) -> Reply:
    """An answer that depends on the prompt only (and on the sampled seed), as a deterministic model's does."""
    digest = hashlib.sha256(f"{prompt_text(request)}|{request.get('seed')}".encode()).hexdigest()
    return answer(str(int(digest[:4], 16) % 20), n)


def write_config(tmp_path: Path, base_url: str, *, temperature: float = 0.0, cache: str = "") -> Path:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'''concurrency = 1
[models.default]
provider = "openai"
model = "fake"
base_url = "{base_url}"
api_key_env = "CACHE_TEST_KEY"
temperature = {temperature}
price_input_per_1m = 2.0
price_output_per_1m = 8.0
[mas]
agents = 2
max_rounds = 1
[cache]
path = "{tmp_path / 'responses.sqlite'}"
{cache}
''')
    return cfg


def sweep(tmp_path: Path, cfg: Path, exp: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CACHE_TEST_KEY": "k"}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
                           "--task-limit", "2", "--systems", "sas,debate", "--output-root", str(tmp_path / "out"),
                           "--experiment-id", exp, "--progress", "none", "--cache", "readwrite", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def runs(root: Path) -> dict[str, dict]:
    return {f"{r['system']}/{r['task_id']}/{r['run_index']}": r
            for r in (json.loads(p.read_text()) for p in sorted(root.rglob("run_*.result.json")))}


def llm_events(root: Path) -> list[dict]:
    return [e for p in sorted(root.rglob("run_*.trace.jsonl")) for e in map(json.loads, p.read_text().splitlines())
            if e.get("model")]


def test_a_second_identical_sweep_sends_no_request_and_reproduces_answers_tokens_and_saved_money(tmp_path, endpoint):
    server = endpoint(reply_by_prompt)
    cfg = write_config(tmp_path, server.base_url)
    sweep(tmp_path, cfg, "first")
    sent = len(server.requests)
    assert sent > 0
    sweep(tmp_path, cfg, "second")
    assert len(server.requests) == sent, "the cached sweep sent requests"

    first, second = runs(tmp_path / "out" / "first"), runs(tmp_path / "out" / "second")
    assert first.keys() == second.keys() and len(first) == 4
    for key in first:
        for field in ("answer", "success", "completion", "tokens_total"):
            assert first[key][field] == second[key][field], (key, field)
    # The controller's decision events do not carry the judge call's cache flag yet (its cost is 0, as paid).
    hits, fresh = (
        [e for e in llm_events(tmp_path / "out" / run) if e["actor"] != "system:controller"] for run in ("second", "first"))
    assert hits and all(e.get("cache_hit") is True and e["cost_usd"] == 0.0 for e in hits)
    assert [e.get("route") for e in hits] == [e.get("route") for e in fresh], "a hit names its route as the call did"
    assert not any(e.get("cache_hit") for e in fresh)
    saved = sum(e["cost_usd_saved"] for e in hits)
    assert saved == pytest.approx(sum(e["cost_usd"] for e in fresh)) and saved > 0

    stats = subprocess.run([sys.executable, str(ROOT / "main.py"), "cache", "stats", "--json", "--path",
                            str(tmp_path / "responses.sqlite")], cwd=ROOT, capture_output=True, text=True, check=True)
    (row,) = json.loads(stats.stdout)["models"]
    # every request of the first sweep was stored once and answered once from the cache in the second
    # (judge calls included, whose events carry no model label yet)
    assert row["entries"] == sent and row["hits"] == sent
    assert row["cost_usd_saved"] == pytest.approx(row["cost_usd_stored"]) and row["cost_usd_saved"] >= saved


def test_repeated_runs_of_a_task_keep_their_own_replies_unless_asked_to_share(tmp_path, endpoint):
    server = endpoint(reply_by_prompt)
    cfg = write_config(tmp_path, server.base_url, temperature=0.7)
    sweep(tmp_path, cfg, "apart", "--runs-per-task", "3", "--systems", "sas")
    per_run = len(server.requests) // 6
    assert len(server.requests) == 6 * per_run > 0, "every run of every task asked the endpoint itself"

    shared_cfg = write_config(tmp_path, server.base_url, temperature=0.7, cache="share_runs = true")
    (tmp_path / "responses.sqlite").unlink()
    before = len(server.requests)
    sweep(tmp_path, shared_cfg, "shared", "--runs-per-task", "3", "--systems", "sas")
    assert len(server.requests) - before == 2 * per_run, "runs 1 and 2 reuse run 0's replies when asked"


def _key(**change: object) -> str:
    base: dict = dict(provider="openai", model="m", endpoint="http://h/v1", messages=[HumanMessage("q")], tools=[],
                      temperature=0.0, max_tokens=100, seed=1, response_format=None, place={"contract": "c"})
    return request_key(**{**base, **change})


@pytest.mark.parametrize("change", [
    {"provider": "embedded"}, {"model": "m2"}, {"endpoint": "http://other/v1"}, {"messages": [HumanMessage("q2")]},
    {"temperature": 0.5}, {"max_tokens": 99}, {"seed": 2}, {"response_format": {"type": "json_object"}},
    {"place": {"contract": "d"}},
])
def test_every_part_of_a_request_is_in_its_key(change):
    assert _key(**change) != _key()


def test_a_nondeterministic_call_is_cached_only_when_asked(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    strict = CacheUse(cache=cache, reads=True, writes=True, settings=CacheSettings(mode="readwrite"), run_seed=1)
    loose = CacheUse(cache=cache, reads=True, writes=True,
                     settings=CacheSettings(mode="readwrite", nondeterministic=True), run_seed=1)
    assert strict.cacheable(0.0, None) and strict.cacheable(0.7, 3)
    assert not strict.cacheable(0.7, None) and loose.cacheable(0.7, None)


def test_an_expired_entry_misses_and_a_stored_reply_round_trips_with_its_tool_calls(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    msg = AIMessage(content="", tool_calls=[{"name": "python", "args": {"code": "1"}, "id": "call_1"}])
    cache.put("k", provider="p", model="m", reply=CachedReply(message=msg, token_in=3, token_out=4,
                                                              usage_source="provider", cost_usd=0.5, latency_ms=9.0))
    hit = cache.get("k")
    assert hit is not None and hit.message.tool_calls[0]["args"] == {"code": "1"} and hit.cost_usd == 0.5
    assert cache.get("k", max_age_days=1e-9) is None
    assert cache.clear() == 1 and cache.get("k") is None


def test_a_server_the_project_started_is_keyed_by_its_model_not_its_port(tmp_path):
    from types import SimpleNamespace

    from mas.llm.call import _cache_key

    use = CacheUse(cache=ResponseCache(tmp_path / "c.sqlite"), reads=True, writes=True,
                   settings=CacheSettings(mode="readwrite"), run_seed=1)

    def bound(port: int, server: object) -> SimpleNamespace:
        return SimpleNamespace(provider="embedded", model_label="qwen", server=server, cacheable=True,
                               base_url=f"http://127.0.0.1:{port}/v1", route=SimpleNamespace(temperature=0.0, max_tokens=64),
                               model=SimpleNamespace(seed=1))

    key = lambda b: _cache_key(use, b, [HumanMessage("q")], [], None, None, None, {"contract": "c"}, {})  # noqa: E731
    # each sweep starts its own llama-server on a free port: the re-run must still hit
    assert key(bound(40001, object())) == key(bound(40002, object()))
    # an endpoint someone else runs is part of the identity
    assert key(bound(40001, None)) != key(bound(40002, None))


def test_a_reply_that_echoes_a_key_is_stored_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "planted~cache4242")  # named like a secret
    cache = ResponseCache(tmp_path / "c.sqlite")
    msg = AIMessage(content="your key is planted~cache4242",
                    tool_calls=[{"name": "python", "args": {"code": "print('planted~cache4242')"}, "id": "call_1"}])
    cache.put("k", provider="p", model="m", reply=CachedReply(message=msg, token_in=3, token_out=4,
                                                              usage_source="provider", cost_usd=0.5, latency_ms=9.0))
    hit = cache.get("k")
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite*"))
    assert b"planted~cache4242" not in stored  # a rotated key would otherwise replay into later runs' files
    assert hit is not None and "[REDACTED]" in hit.message.content
