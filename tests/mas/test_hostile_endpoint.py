"""Issue 18 end to end, through the CLI only: a TOML config, ``python main.py run``, and a fake OpenAI-compatible
endpoint on 127.0.0.1 that is hostile (it returns code attacking the sweep, echoes the key it was sent, puts
the key in a 401 body) or broken (every call fails).

The planted key lives in a variable whose name says nothing about secrets and whose value is not shaped like a
key, so only the route's ``api_key_env`` makes it a secret. Every byte of the experiment directory (SQLite
included) and of the command's output is searched for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.fake_endpoint import Reply, answer, completion, tool_calls

ROOT = Path(__file__).resolve().parents[2]
KEY_VAR = "MY_LLM_SESAME"


def hostile_code(key: str, markers: list[Path]) -> str:
    """A correct HumanEval_0 answer that also attacks: the parent's environment, a pidfd kill of the parent,
    writes outside through open, sqlite3 and patched builtins, and the key in a comment."""
    a, b, c = (str(m) for m in markers)
    return f'''# echoed: {key}
import builtins, os, signal, sqlite3


def has_close_elements(numbers, threshold):
    for i, x in enumerate(numbers):
        for j, y in enumerate(numbers):
            if i != j and abs(x - y) < threshold:
                return True
    return False


for path in ("/proc/%d/environ" % os.getppid(), "/proc/1/environ"):
    try:
        print(open(path, "rb").read())
    except OSError as err:
        print("refused", err)
try:
    signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)
except OSError as err:
    print("refused", err)
for attempt in (lambda: open({a!r}, "w").write("x"),
                lambda: sqlite3.connect({b!r}).execute("create table t(x)")):
    try:
        attempt()
    except Exception as err:
        print("refused", err)
builtins.isinstance = lambda *args: True
try:
    open({c!r}, "w").write("x")
except Exception as err:
    print("refused", err)
print("echoed: {key}")
'''


def hostile_reply(markers: list[Path]):
    """The endpoint: a python tool call with the hostile code when tools are offered and none ran yet, else an
    answer holding it; both echo the key from the request's Authorization header."""

    def reply(n: int, request: dict) -> Reply:
        key = request["_headers"].get("authorization", "").removeprefix("Bearer ")
        code = hostile_code(key, markers)
        ran_tool = any(m.get("role") == "tool" for m in request.get("messages", []))
        if request.get("tools") and not ran_tool:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{n}", "type": "function",
                "function": {"name": "python", "arguments": json.dumps({"code": code})}}]}
            body = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": "fake",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}
            return 200, {"content-type": "application/json"}, json.dumps(body).encode()
        return completion(json.dumps({"reasoning": f"your key is {key}",
                                      "answer_artifact": f"```python\n{code}```", "confidence": 0.9}), n)

    return reply


def write_config(tmp_path: Path, base_url: str, **route: object) -> Path:
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in route.items())
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'''concurrency = 2
[models.default]
provider = "openai"
model = "fake"
base_url = "{base_url}"
api_key_env = "{KEY_VAR}"
{extra}
[mas]
agents = 2
max_rounds = 1
''')
    return cfg


def run_cli(tmp_path: Path, cfg: Path, key: str, *, benchmark: str, systems: str, exp: str = "e",
            extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, KEY_VAR: key}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", benchmark,
                           "--task-limit", "1", "--runs-per-task", "1", "--systems", systems, "--output-root",
                           str(tmp_path / "out"), "--experiment-id", exp, "--progress", "log", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=900)


def planted_key() -> str:
    # '~' is outside every key shape the redactor knows: only the route's api_key_env makes this a secret.
    return f"planted~{uuid.uuid4().hex}"


def assert_nowhere(key: str, root: Path, *outputs: str) -> None:
    needles = (key.encode(), key.split("~", 1)[1].encode())
    leaks = [str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]
    assert not leaks, f"the key is in {leaks}"
    for out in outputs:
        assert not any(n.decode() in out for n in needles), "the key is in the command's output"


def results(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("run_*.result.json"))]


def test_hostile_code_and_an_echoed_key_reach_nothing(tmp_path, endpoint):
    key = planted_key()
    markers = [tmp_path / "outside_open", Path("/tmp") / f"outside_sqlite_{uuid.uuid4().hex}",
               tmp_path / "outside_builtins"]
    server = endpoint(hostile_reply(markers))
    cfg = write_config(tmp_path, server.base_url)
    proc = run_cli(tmp_path, cfg, key, benchmark="humaneval", systems="sas,debate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rs = results(tmp_path / "out" / "e")
    assert [(r["system"], r["status"], r["completion"]) for r in rs] == [("debate", "finished", True),
                                                                        ("sas", "finished", True)]
    # the answers were evaluated in the sandbox: correct functions pass, and every attack was refused there
    evals = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "e").rglob("run_*.eval.json"))]
    assert all(e["success"] and e["details"]["isolation"] == "namespaces" for e in evals), evals
    assert not [m for m in markers if m.exists()], "hostile code wrote outside its sandbox"
    assert any(r.get("role") == "tool" for req in server.requests for r in req.get("messages", []))
    assert_nowhere(key, tmp_path / "out", proc.stdout, proc.stderr)


def test_a_401_with_the_key_in_its_body_is_an_error_and_leaks_nothing(tmp_path, endpoint):
    key = planted_key()

    def reply(n: int, request: dict) -> Reply:
        sent = request["_headers"].get("authorization", "").removeprefix("Bearer ")
        body = {"error": {"message": f"Incorrect API key provided: {sent}", "type": "invalid_request_error"}}
        return 401, {"content-type": "application/json"}, json.dumps(body).encode()

    server = endpoint(reply)
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), key, benchmark="arith", systems="sas,debate")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "infrastructure error" in proc.stderr
    root = tmp_path / "out" / "e"
    assert [(r["status"], r["success"], r["completion"]) for r in results(root)] == [("error", False, False)] * 2
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["counts"]["errors"] == 2 and manifest["counts"]["finished"] == 0
    assert_nowhere(key, tmp_path / "out", proc.stdout, proc.stderr)


def test_every_call_failing_is_recorded_as_an_error_and_retried_when_the_endpoint_recovers(tmp_path, endpoint):
    key = planted_key()
    state = {"down": True}

    def reply(n: int, request: dict) -> Reply:
        if not state["down"]:
            return answer("7", n)
        if n % 2:
            return 500, {"content-type": "application/json"}, b'{"error": {"message": "internal error"}}'
        time.sleep(2.0)  # a hang, beyond the route's timeout
        return 500, {"content-type": "application/json"}, b"{}"

    server = endpoint(reply)
    cfg = write_config(tmp_path, server.base_url, max_retries=1, timeout_s=0.5)
    proc = run_cli(tmp_path, cfg, key, benchmark="arith", systems="sas,supervisor,debate,orchestrator")
    assert proc.returncode == 1, proc.stderr[-3000:]
    root = tmp_path / "out" / "e"
    rs = {r["system"]: r for r in results(root)}
    assert set(rs) == {"sas", "supervisor", "debate", "orchestrator"}
    for system, r in rs.items():
        assert (r["status"], r["completion"], r["success"], r["answer"]) == ("error", False, False, ""), system
        trace = (root / "arith" / system / r["task_id"] / f"run_{r['run_index']}.trace.jsonl").read_text()
        events = [json.loads(line) for line in trace.splitlines()]
        assert events[-1]["event_type"] == "error" and events[-1]["payload"]["kind"] == "run_failed", system
        assert "LLMCallError" in events[-1]["payload"]["error"], system
    assert json.loads((root / "manifest.json").read_text())["counts"]["errors"] == 4
    summary = json.loads((root / "experiment_summary.json").read_text())
    assert {r["system"]: (r["n_errors"], r["error_rate"], r["success_rate"]) for r in summary["rollups"]} == {
        s: (1, 1.0, None) for s in rs}
    # The endpoint recovers: the same command retries the errored runs (and only those).
    state["down"] = False
    again = run_cli(tmp_path, cfg, key, benchmark="arith", systems="sas,supervisor,debate,orchestrator")
    assert again.returncode == 0, again.stderr[-3000:]
    assert {r["system"]: r["status"] for r in results(root)} == dict.fromkeys(rs, "finished")
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["counts"]["errors"] == 0 and {r["attempts"] for r in manifest["runs"]} == {2}
    assert_nowhere(key, tmp_path / "out", proc.stdout, proc.stderr, again.stdout, again.stderr)


def test_a_tool_name_the_endpoint_would_refuse_back_is_the_models_failure_not_an_infrastructure_error(tmp_path,
                                                                                                       endpoint):
    import re

    valid = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for a function name, checked as it checks it

    def reply(n: int, request: dict) -> Reply:
        names = [c["function"]["name"] for m in request.get("messages", []) for c in m.get("tool_calls") or []]
        if any(not valid.match(name) for name in names):
            body = {"error": {"message": "Invalid 'messages[2].tool_calls[0].function.name'", "type":
                              "invalid_request_error", "code": "invalid_value"}}
            return 400, {"content-type": "application/json"}, json.dumps(body).encode()
        if request.get("tools") and not names:
            return tool_calls([("../../etc/passwd", "{}")], n)
        return answer("-1", n)

    server = endpoint(reply)
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), "k", benchmark="arith", systems="sas")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [r] = results(tmp_path / "out" / "e")
    assert (r["status"], r["success"]) == ("finished", False)  # a wrong answer after a call to no tool
    trace = next((tmp_path / "out" / "e").rglob("run_0.trace.jsonl")).read_text()
    assert "unknown tool" in trace.lower() or "no tool" in trace.lower()


def test_tool_arguments_that_are_json_but_no_object_are_the_models_failure(tmp_path, endpoint):
    def reply(n: int, request: dict) -> Reply:
        called = any(m.get("role") == "tool" for m in request.get("messages", []))
        if request.get("tools") and not called:
            return tool_calls([("calculator", args) for args in ('["a"]', "5", '"2+2"', "{not json")], n)
        return answer("-1", n)

    server = endpoint(reply)
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), "k", benchmark="arith", systems="sas")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [r] = results(tmp_path / "out" / "e")
    assert (r["status"], r["success"]) == ("finished", False)  # not a malformed reply retried into an error
    # no retry of a "malformed" reply: each call is answered with why it could not run, and the model goes on
    assert len(server.requests) == 2
    second = server.requests[1]["messages"]
    answered = [m for m in second if m.get("role") == "tool"]
    assert len(answered) == 4 and all("could not be read as a JSON object" in m["content"] for m in answered)
    ids = [c["id"] for m in second if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert sorted(ids) == sorted(m["tool_call_id"] for m in answered)  # every call the endpoint sees has its result


def test_only_tool_arguments_that_are_json_but_no_object_are_marked():
    from mas.llm.providers import NOT_AN_OBJECT, _object_arguments

    def body(*args):
        return {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": a}} for a in args]}}]}

    out = _object_arguments(body('["a"]', "5", '{"x": 1}', "{not json", "null", "[]", ""))
    got = [c["function"]["arguments"] for c in out["choices"][0]["message"]["tool_calls"]]
    assert got == [NOT_AN_OBJECT + '["a"]', NOT_AN_OBJECT + "5", '{"x": 1}', "{not json", "null", "[]", ""]
    same = body('{"x": 1}')
    assert _object_arguments(same) is same  # nothing to mark: the reply as it came


def test_a_key_given_in_the_config_file_serves_the_rollback_of_the_same_invocation(tmp_path, endpoint, monkeypatch):
    monkeypatch.delenv(KEY_VAR, raising=False)
    server = endpoint(lambda n, request: answer("-1", n))  # always wrong: every run fails and is rolled back
    cfg = write_config(tmp_path, server.base_url, api_key="planted~cfgkey7788")
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
                           "--task-limit", "1", "--systems", "sas", "--output-root", str(tmp_path / "out"),
                           "--experiment-id", "e", "--progress", "none", "--rollback", "restart"],
                          cwd=ROOT, env={k: v for k, v in os.environ.items() if k != KEY_VAR}, capture_output=True,
                          text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the stored config holds no key; the rollback found it
    [record] = [p for p in (tmp_path / "out" / "e").rglob("run_0.rollback_*.json") if p.name.count(".") == 2]
    assert json.loads(record.read_text())["status"] == "finished"
    assert_nowhere("planted~cfgkey7788", tmp_path / "out", proc.stdout, proc.stderr)
