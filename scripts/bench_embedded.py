"""Throughput of the embedded model server: first-token latency, single-request and aggregate tokens/s.

Starts (or reuses) the llama-server of the ``embedded`` route, warms it up,
then measures with realistic prompts (GSM8K-style word problems, a coding
task, a debate turn) and a fixed ``max_tokens``:

* first-token latency (ms) of a streamed request, median over ``--repeats``;
* output tokens/s of one request (decode rate after the first token, and end to end);
* aggregate output tokens/s with 1, 2 and 4 concurrent requests;
* with ``--reference``, llama.cpp's own figures on the same GGUF and threads, and the ratios: ``llama-bench``
  (decode tokens/s of one sequence, against the single request's decode rate) and ``llama-batched-bench``
  (output tokens over wall time of N sequences with the measured prompt length, against N concurrent
  requests). The two tools are built once in the server's build tree (a minute; never needed otherwise).

By default every request generates exactly ``--max-tokens`` tokens
(``ignore_eos``), so the levels compare equal work; ``--natural-stop`` lets
the model stop on its own. Token counts come from the server's ``usage``.

    python scripts/bench_embedded.py                 # default model, 128 tokens
    python scripts/bench_embedded.py --threads 1 --json bench.json
    python scripts/bench_embedded.py --reference     # and the ratios to llama-bench / llama-batched-bench
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas.config import EmbeddedSettings  # noqa: E402
from mas.serving.build import build_reference_tool  # noqa: E402
from mas.serving.catalogue import CATALOGUE, cache_paths, print_progress  # noqa: E402
from descriptor.io import write_json_atomic  # noqa: E402
from mas.serving.server import ensure_server  # noqa: E402

PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May? Think step by step, then give the answer.",
    "Write a Python function `merge_intervals(intervals)` that merges overlapping closed intervals given as "
    "a list of (start, end) tuples and returns them sorted. Include a short docstring.",
    "You are debater 2 of 3. Debater 1 argued that the answer is 72 because 48 + 24 = 72. Debater 3 argued "
    "it is 96. Critique both arguments briefly and state which answer you support and why.",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it "
    "take? Explain your reasoning before giving the final number.",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year? "
    "Show the calculation.",
    "Explain in a few sentences what a race condition is and give a minimal Python example that has one.",
]


def _body(model: str, prompt: str, max_tokens: int, natural: bool, stream: bool) -> dict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,  # llama-server ignores max_completion_tokens
        "temperature": 0.0,
        "cache_prompt": False,  # measure prompt processing every time, as distinct agents would
        "stream": stream,
    }
    if not natural:
        body["ignore_eos"] = True
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


async def _streamed(client: httpx.AsyncClient, url: str, body: dict) -> dict:
    """One streamed request: first-token latency (ms), decode and end-to-end tokens/s."""
    t0 = time.perf_counter()
    t_first = None
    usage = None
    # A fresh connection per streamed request: llama-server may close a kept-alive connection after a
    # stream, and httpx reusing it fails with "Server disconnected without sending a response".
    async with client.stream("POST", url, json=body, headers={"Connection": "close"}) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if t_first is None and any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                t_first = time.perf_counter()
            usage = chunk.get("usage") or usage
    t_end = time.perf_counter()
    n = usage["completion_tokens"]
    return {
        "ttft_ms": (t_first - t0) * 1000,
        "tokens": n,
        "prompt_tokens": usage["prompt_tokens"],
        "decode_tok_s": (n - 1) / (t_end - t_first) if n > 1 else float("nan"),
        "e2e_tok_s": n / (t_end - t0),
    }


async def _one(client: httpx.AsyncClient, url: str, body: dict) -> int:
    resp = await client.post(url, json=body)
    resp.raise_for_status()
    return resp.json()["usage"]["completion_tokens"]


async def _concurrent(client: httpx.AsyncClient, url: str, bodies: list[dict]) -> dict:
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(_one(client, url, b) for b in bodies))
    wall = time.perf_counter() - t0
    return {"requests": len(bodies), "tokens": sum(counts), "wall_s": wall, "agg_tok_s": sum(counts) / wall}


async def run_bench(base_url: str, model: str, args: argparse.Namespace) -> dict:
    url = f"{base_url}/chat/completions"
    mt, nat = args.max_tokens, args.natural_stop
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0)) as client:
        await _one(client, url, _body(model, "Say hello.", 8, True, False))  # warm-up: page in weights
        singles = []
        for i in range(args.repeats):
            singles.append(await _streamed(client, url, _body(model, PROMPTS[i % len(PROMPTS)], mt, nat, True)))
        levels = {}
        for c in args.concurrency:
            bodies = [_body(model, PROMPTS[j % len(PROMPTS)], mt, nat, False) for j in range(c)]
            levels[c] = await _concurrent(client, url, bodies)
    med = lambda key: statistics.median(s[key] for s in singles)  # noqa: E731
    return {
        "single": {
            "ttft_ms": med("ttft_ms"),
            "decode_tok_s": med("decode_tok_s"),
            "e2e_tok_s": med("e2e_tok_s"),
            "runs": singles,
        },
        "concurrent": levels,
    }


def reference(settings: EmbeddedSettings, gguf: str, threads: int, max_tokens: int, prompt_tokens: int,
              levels: list[int]) -> dict:
    """llama.cpp's figures on ``gguf`` with ``threads``: one sequence's decode tok/s (``llama-bench``) and,
    per level, output tok/s over wall time of that many sequences of ``prompt_tokens`` (``llama-batched-bench``)."""
    paths = cache_paths(settings)
    bench = build_reference_tool(paths, "llama-bench", print_progress)
    batched = build_reference_tool(paths, "llama-batched-bench", print_progress)
    t = str(threads)
    out = subprocess.run([str(bench), "-m", gguf, "-t", t, "-p", "0", "-n", str(max_tokens), "-r", "3", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    tg = next(r["avg_ts"] for r in json.loads(out) if r["n_gen"] > 0)
    ctx = max(levels) * (prompt_tokens + max_tokens) + 256
    out = subprocess.run([str(batched), "-m", gguf, "-t", t, "-tb", t, "-c", str(ctx), "-npp", str(prompt_tokens),
                          "-ntg", str(max_tokens), "-npl", ",".join(map(str, levels)), "--output-format", "jsonl"],
                         capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in (out.stdout + out.stderr).splitlines() if line.startswith('{"n_kv_max"')]
    # Output tokens over the whole wall time (prompts included), as the concurrent requests are measured.
    agg = {r["pl"]: r["pl"] * r["tg"] / r["t"] for r in rows}
    return {"single_decode_tok_s": tg, "agg_tok_s": agg, "prompt_tokens": prompt_tokens}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(CATALOGUE), default="qwen2.5-coder-0.5b")
    p.add_argument("--cache-dir", help="cache directory (default: $MAS_CACHE_DIR or ~/.cache/mas-econ)")
    p.add_argument("--max-tokens", type=int, default=128, help="output tokens per request (default 128)")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    p.add_argument("--repeats", type=int, default=3, help="streamed single requests for the medians")
    p.add_argument("--threads", type=int, default=0, help="server threads, 0 = cores (only for a new server)")
    p.add_argument("--natural-stop", action="store_true", help="let the model stop before max-tokens")
    p.add_argument("--reference", action="store_true",
                   help="also run llama-bench and llama-batched-bench on the same GGUF and threads; print the ratios")
    p.add_argument("--json", help="also write the figures to this JSON file")
    args = p.parse_args(argv)

    settings = EmbeddedSettings(
        model=args.model, cache_dir=args.cache_dir, parallel=max(args.concurrency), threads=args.threads,
        ctx_size=max(args.concurrency) * 2048, startup_timeout_s=600,
    )  # fmt: skip
    t0 = time.perf_counter()
    handle = ensure_server(settings)
    startup_s = time.perf_counter() - t0
    slots = handle.record.parallel
    if slots < max(args.concurrency):
        print(f"note: reusing a server with {slots} slots; higher concurrency queues", file=sys.stderr)
    load_before = os.getloadavg()[0]
    res = asyncio.run(run_bench(handle.base_url, handle.model, args))
    res.update(
        model=handle.model, max_tokens=args.max_tokens, ignore_eos=not args.natural_stop, slots=slots,
        threads=handle.record.threads, cores=len(os.sched_getaffinity(0)), server_owned=handle.owned,
        server_ready_s=startup_s, loadavg_1m=[load_before, os.getloadavg()[0]],
    )  # fmt: skip

    s = res["single"]
    print(f"model {handle.model}  max_tokens {args.max_tokens}  slots {slots}  threads {res['threads']}  "
          f"cores {res['cores']}  load avg {load_before:.1f}->{res['loadavg_1m'][1]:.1f}")  # fmt: skip
    print(f"server ready in {startup_s:.1f} s ({'started' if handle.owned else 'reused'})")
    print(f"first-token latency (streaming, median of {args.repeats}): {s['ttft_ms']:.0f} ms")
    print(f"one request: {s['decode_tok_s']:.1f} output tok/s decoding, {s['e2e_tok_s']:.1f} tok/s end to end")
    for c, lv in res["concurrent"].items():
        print(
            f"{c} concurrent: {lv['agg_tok_s']:.1f} aggregate output tok/s "
            f"({lv['tokens']} tokens in {lv['wall_s']:.1f} s)"
        )
    if args.reference:
        pt = round(statistics.median(r["prompt_tokens"] for r in s["runs"]))
        ref = reference(settings, handle.record.model_path, handle.record.threads, args.max_tokens, pt,
                        args.concurrency)
        ref["loadavg_1m"] = os.getloadavg()[0]
        res["reference"] = ref
        ratio = s["decode_tok_s"] / ref["single_decode_tok_s"]
        print(f"llama-bench, {res['threads']} threads: {ref['single_decode_tok_s']:.1f} tok/s decoding; "
              f"one request / llama-bench = {ratio:.2f}  (load avg {ref['loadavg_1m']:.1f})")
        for c, lv in res["concurrent"].items():
            if c in ref["agg_tok_s"]:
                print(f"llama-batched-bench, {c} sequences of {pt} prompt tokens: {ref['agg_tok_s'][c]:.1f} output "
                      f"tok/s; {c} concurrent / batched-bench = {lv['agg_tok_s'] / ref['agg_tok_s'][c]:.2f}")
    if args.json:
        write_json_atomic(args.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
