"""What the response cache reads back is untrusted: it may not bend a measurement, and the cache commands may
not destroy the cache.

- the scripted double's injection plan changes its replies, so a run with one is never answered from the cache
  (a clean sweep's replies would hide the injected errors: success 1.0 instead of 0.0, ground truth lost);
- a stored entry passes the checks a fresh reply passes; a damaged one is a miss (the call is made again, the
  entry replaced) and is counted in ``cache stats``, never the system's failure;
- a file at the cache's path that is not a cache is refused before the first run, in one line;
- ``cache export --out`` onto the cache, ``cache stats`` on a corrupt file and ``cache clear --older-than-days
  -1`` are refused in one line (exit 2) and leave the cache as it was.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from main import main

SWEEP = ["run", "--benchmark", "arith", "--systems", "sas,debate", "--model", "scripted", "--task-limit", "2",
         "--progress", "none"]


def sweep(tmp_path: Path, exp: str, *args: str) -> dict[str, dict]:
    """Run the scripted sweep as experiment ``exp``; its runs' metadata, results and trace by run."""
    assert main([*SWEEP, "--output-root", str(tmp_path / "out"), "--experiment-id", exp, *args]) == 0
    root = tmp_path / "out" / exp
    out = {}
    for res in sorted(root.rglob("run_*.result.json")):
        stem = str(res)[: -len(".result.json")]
        out[str(res.relative_to(root))] = {
            "result": json.loads(res.read_text()), "metadata": json.loads(Path(stem + ".metadata.json").read_text()),
            "trace": [json.loads(ln) for ln in Path(stem + ".trace.jsonl").read_text().splitlines()]}
    return out


def cached(tmp_path: Path) -> list[str]:
    return ["--cache", "readwrite", "--set", f'cache.path="{tmp_path / "responses.sqlite"}"']


def outcome(runs: dict[str, dict]) -> dict[str, tuple]:
    return {k: (r["result"]["success"], r["result"]["status"], r["result"]["error"],
                json.dumps(r["metadata"]["injected_error"], sort_keys=True)) for k, r in runs.items()}


def hits(runs: dict[str, dict]) -> int:
    return sum(bool(e.get("cache_hit")) for r in runs.values() for e in r["trace"])


def test_a_run_with_an_injected_error_is_never_answered_from_a_clean_sweeps_cache(tmp_path):
    clean = sweep(tmp_path, "clean", *cached(tmp_path))
    assert all(r["result"]["success"] for r in clean.values())
    injected = sweep(tmp_path, "injected", *cached(tmp_path), "--inject-errors", "1.0")
    uncached = sweep(tmp_path, "uncached", "--inject-errors", "1.0")
    assert outcome(injected) == outcome(uncached)
    assert not all(r["result"]["success"] for r in injected.values())  # sas fails its injected runs
    assert all(r["metadata"]["injected_error"] is not None for r in injected.values())
    assert hits(injected) == 0
    again = sweep(tmp_path, "clean_again", *cached(tmp_path))  # clean runs still share the cache
    assert outcome(again) == outcome(clean) and hits(again) > 0


def _damage(db: Path, how: str) -> int:
    """Damage every stored entry one way; how many there were."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT key, reply FROM responses").fetchall()
    for key, reply in rows:
        if how == "reply_not_json":
            value = ("reply", "{not json")
        elif how == "lone_surrogate":  # a JSON escape decoding to a lone surrogate, which no cleaned reply holds
            value = ("reply", reply.replace('"content": "', '"content": "\\ud83d', 1))
        elif how == "not_an_ai_message":
            value = ("reply", json.dumps({"type": "human", "data": {"content": "hi", "type": "human"}}))
        elif how == "negative_tokens":
            value = ("token_in", -5)
        elif how == "text_tokens":
            value = ("token_out", "many")
        elif how == "absurd_tokens":
            value = ("token_out", 10**12)
        elif how == "unknown_usage_source":
            value = ("usage_source", "trust me")
        elif how == "negative_cost":
            value = ("cost_usd", -1.0)
        else:
            raise AssertionError(how)
        con.execute(f"UPDATE responses SET {value[0]} = ? WHERE key = ?", (value[1], key))
    con.commit()
    con.close()
    return len(rows)


@pytest.mark.parametrize("how", ["reply_not_json", "lone_surrogate", "not_an_ai_message", "negative_tokens",
                                 "text_tokens", "absurd_tokens", "unknown_usage_source", "negative_cost"])
def test_a_damaged_entry_is_a_miss_that_is_redone_replaced_and_counted(tmp_path, capsys, how):
    first = sweep(tmp_path, "first", *cached(tmp_path))
    db = tmp_path / "responses.sqlite"
    n = _damage(db, how)
    assert n > 0
    second = sweep(tmp_path, "second", *cached(tmp_path))
    # the measurement is the clean one: nothing the damaged entries held reached a run
    assert outcome(second) == outcome(first)
    assert hits(second) == 0
    assert [e["token_in"] for r in second.values() for e in r["trace"] if e.get("model")] == \
           [e["token_in"] for r in first.values() for e in r["trace"] if e.get("model")]
    capsys.readouterr()
    assert main(["cache", "stats", "--json", "--path", str(db)]) == 0
    stats = json.loads(capsys.readouterr().out)["models"]
    assert sum(m["rejected"] for m in stats) == n
    third = sweep(tmp_path, "third", *cached(tmp_path))  # the entries were replaced: now they answer
    assert outcome(third) == outcome(first) and hits(third) == n


@pytest.mark.parametrize("content", ["junk", "sqlite-of-another-kind", "directory"])
def test_a_cache_file_that_is_not_a_cache_is_refused_before_the_first_run(tmp_path, capsys, content):
    path = tmp_path / "responses.sqlite"
    if content == "junk":
        path.write_text("this is a TOML config, say\n")
    elif content == "directory":
        path.mkdir()
    else:
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB)")
        con.commit()
        con.close()
    before = path.read_bytes() if path.is_file() else None
    capsys.readouterr()
    assert main([*SWEEP, "--output-root", str(tmp_path / "out"), "--experiment-id", "e", *cached(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err, err
    assert ("is a directory" if content == "directory" else "not a response cache") in err, err
    assert not (tmp_path / "out" / "e").exists()  # nothing half-made
    assert before is None or path.read_bytes() == before


@pytest.fixture
def cache_file(tmp_path):
    sweep(tmp_path, "first", *cached(tmp_path))
    db = tmp_path / "responses.sqlite"
    return db


def _entries(db: Path) -> int:
    return sqlite3.connect(db).execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def test_export_onto_the_cache_or_another_kind_of_file_is_refused_and_the_cache_is_intact(cache_file, tmp_path,
                                                                                        capsys):
    n = _entries(cache_file)
    config = tmp_path / "experiment.toml"
    config.write_text("concurrency = 1\n")
    for out in (cache_file, Path(f"{cache_file}-wal"), config, tmp_path):
        capsys.readouterr()
        assert main(["cache", "export", "--path", str(cache_file), "--out", str(out)]) == 2, out
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"--out {out}" in err, err
    assert _entries(cache_file) == n and config.read_text() == "concurrency = 1\n"
    good = tmp_path / "export.jsonl"
    assert main(["cache", "export", "--path", str(cache_file), "--out", str(good)]) == 0
    assert len(good.read_text().splitlines()) == n
    assert main(["cache", "export", "--path", str(cache_file), "--out", str(good)]) == 0  # its own kind: rewritten
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_stats_on_a_corrupt_file_and_a_negative_age_are_one_line_refusals(cache_file, tmp_path, capsys):
    n = _entries(cache_file)
    for days in ("-1", "nan", "inf"):
        capsys.readouterr()
        assert main(["cache", "clear", "--path", str(cache_file), f"--older-than-days={days}"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--older-than-days" in err, err
    assert _entries(cache_file) == n
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"\x00garbage" * 100)
    capsys.readouterr()
    assert main(["cache", "stats", "--path", str(corrupt)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a response cache" in err and "Traceback" not in err, err
