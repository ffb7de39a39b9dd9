"""The report of ``scripts/bench --streaming`` (streaming.py): the console summary and its section of
docs/benchmarks-triton.md (written there by triton_report.write_section)."""

from __future__ import annotations

from bench_lib.triton_report import load_warning

TARGET_STREAMS, TPS_TARGET, TTFT_TARGET = 64, 3.0, 1 / 3  # as streaming.py: the targets at 64 streams
FIELDS = ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms")


def get(result: dict, server: str, streams: int, field: str) -> float | None:
    value = result["samples"].get(f"{server}/{streams}", {}).get(field)
    return None if value is None else float(value)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def targets(result: dict) -> list[tuple[str, float | None, str, bool | None]]:
    """(what, measured ratio, the target as written, met) at TARGET_STREAMS streams."""
    n = TARGET_STREAMS
    tps = ratio(get(result, "ours", n, "tokens_per_s"), get(result, "triton", n, "tokens_per_s"))
    ttft = ratio(get(result, "ours", n, "ttft_p99_ms"), get(result, "triton", n, "ttft_p99_ms"))
    return [(f"tokens/s at {n} streams, ours / Triton's", tps, f"≥ {TPS_TARGET:g}",
             None if tps is None else tps >= TPS_TARGET),
            (f"p99 time to first token at {n} streams, ours / Triton's", ttft, "≤ 1/3",
             None if ttft is None else ttft <= TTFT_TARGET)]


def rows(result: dict) -> list[list[str]]:
    out = []
    for n in result["streams"]:
        for server in result["servers"]:
            s = result["samples"].get(f"{server}/{n}", {})
            cells = [fmt(get(result, server, n, f), 0 if f == "tokens_per_s" else (1 if "ttft" in f else 3))
                     for f in FIELDS]
            out.append([str(n), "ours" if server == "ours" else "Triton", *cells, str(s.get("requests", "–")),
                        fmt(get(result, server, n, "client_cores"), 2), fmt(get(result, server, n, "server_cores"), 2),
                        fmt(get(result, server, n, "load"), 1), str(s.get("error_count", "–"))])
    return out


def ratio_rows(result: dict) -> list[list[str]]:
    out = []
    if set(result["servers"]) != {"ours", "triton"}:
        return out
    for n in result["streams"]:
        out.append([str(n)] + [fmt(ratio(get(result, "ours", n, f), get(result, "triton", n, f)), 2) for f in FIELDS])
    return out


def summary(result: dict) -> str:
    lines = ["", f"streaming: {result['duration_s']:g} s per server and count, {result['max_tokens']} tokens per "
             f"completion, {result['instances']} instance(s); {result['elapsed_s']:.0f} s; load "
             f"{result.get('uptime_start')} -> {result.get('uptime_end')}",
             f"  {'streams':>7} {'server':<7} {'tokens/s':>9} {'TTFT p50':>9} {'p99':>8} {'ITL p50':>8} {'p99':>8} "
             f"{'TPOT p50':>8} {'p99':>8} {'requests':>8} {'client':>6} {'server':>6} {'load':>5} {'errors':>6}"]
    for r in rows(result):
        lines.append(f"  {r[0]:>7} {r[1]:<7} {r[2]:>9} {r[3]:>9} {r[4]:>8} {r[5]:>8} {r[6]:>8} {r[7]:>8} {r[8]:>8} "
                     f"{r[9]:>8} {r[10]:>6} {r[11]:>6} {r[12]:>5} {r[13]:>6}")
    if ratio_rows(result):
        lines.append("  ours / Triton: streams, tokens/s, TTFT p50, TTFT p99, ITL p50, ITL p99, TPOT p50, TPOT p99")
        lines += ["  " + "  ".join(r) for r in ratio_rows(result)]
        lines.append("Targets:")
        for what, value, target, met in targets(result):
            lines.append(f"  {what}: {fmt(value, 2)} (target {target}): "
                         f"{ {True: 'met', False: 'NOT met', None: 'not measured'}[met] }")
    if result["problems"]:
        lines.append("Problems:")
        lines += [f"  {p}" for p in result["problems"]]
    return "\n".join(lines)


def markdown(result: dict) -> str:
    m = result["machine"]
    out = [
        "## Streamed completions: pytriton's OpenAI port beside Triton's OpenAI frontend (issue 36)", "",
        f"{result.get('date', '?')}, commit {result.get('git', '?')}; {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs, "
        f"{m.get('memory', '?')}, Linux {m.get('kernel', '?')}, Python {m.get('python', '?')}; "
        f"{result['elapsed_s'] / 60:.1f} minutes. Load averages (`uptime`) {result.get('uptime_start', '?')} at the "
        f"start, {result.get('uptime_end', '?')} at the end." + load_warning(
            result, ", and the suite must be run again on a quiet machine before its ratios are quoted"), "",
        f"One model repository holds `stream_llm` (scripts/bench_lib/stream_model.py): a decoupled Python-backend "
        f"model in the tensor convention of Triton's vLLM backend (`text_input`, `stream`, `sampling_parameters` → "
        f"`text_output`) that sends `max_tokens` responses of a few characters each (\" t0\", \" t1\"...) without "
        f"sleeping or computing, so that what is measured is the serving path. **{result['instances']} instances** on "
        "both sides, as many as the CPUs of the machine this was written for: a decoupled model serves one request per "
        f"instance at a time (here for as long as its {result['max_tokens']} sends take), so from 16 streams on the "
        "requests queue for the instances on both sides and the time to first token is mostly that queue's wait, "
        "which shrinks as the server's tokens/s grows (`--instances N` changes it for both). "
        "**Ours**: `pytriton serve --model-repository R --openai-port 0`. "
        "**Triton**: Triton's OpenAI frontend (`python/openai/openai_frontend/main.py` of "
        f"{result.get('triton_tag', '?')}, "
        "unchanged) started with `--model-repository R --backend vllm --tokenizer T` (a word-level tokenizer made "
        "offline) in its own venv (.bench/triton-openai: pytriton installed with `pip install -e`, fastapi 0.111.1, "
        "transformers 4.57.6, tokenizers, uvicorn), running on pytriton's in-process API (`import tritonserver`): the "
        "models run in the same worker processes on both sides; only the front end differs. Triton's frontend keeps "
        "its "
        "defaults: uvicorn (with uvloop and httptools, installed with pytriton) at log level info, so one access-log "
        "line per request (not per token).", "",
        f"The client (scripts/bench_lib/sse_load.py) is one process of its own per run, plain asyncio streams: N "
        f"streams, each a keep-alive HTTP/1.1 connection asking one `POST /v1/completions` (`stream: true`, "
        f"`max_tokens: {result['max_tokens']}`) after another for {result['duration_s']:g} s; the requests in flight "
        "then finish. A token is a chunk of the stream with text (ours sends the finish reason in one more chunk "
        "without text, Triton's with the last token; neither counts). **TTFT**: from sending a request to its "
        "first token; **ITL**: the gaps between the tokens of one request (tokens that arrive in one read share "
        "one arrival time, gap 0: hence p50s near 0 where the server writes several chunks at once); **TPOT** (time "
        "per output token): per "
        "request, from its first token to its last over the gaps between them, the figure that bursts do not hide; "
        "**tokens/s**: all the tokens of the run over its wall time, from the first request to the end of the last "
        "(the requests in flight at the end included: at 256 streams a server's first tokens may come only seconds "
        "after the start). Both servers run side by side; for each stream count the client runs against one then the "
        "other, the order alternating from one count to the next. **client** and **server**: the cores the client "
        "process (getrusage) and the server's process tree (/proc) used during the run; on this machine the client, "
        "the server and the rest of the load share the same CPUs, so a side's figures are also bounded by what the "
        "client could do on what was left.", "",
        "| streams | server | tokens/s | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) | TPOT p50 (ms) "
        "| TPOT p99 (ms) | requests | client (cores) | server (cores) | load (1 min) | errors |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows(result)]
    if ratio_rows(result):
        out += ["", "Ours / Triton's (tokens/s: higher is better; latencies: lower is better):", "",
                "| streams | tokens/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | TPOT p50 | TPOT p99 |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        out += ["| " + " | ".join(r) + " |" for r in ratio_rows(result)]
        out += ["", "### Targets", "", "| figure | measured | target | met |", "|---|---:|---|---|"]
        for what, value, target, met in targets(result):
            out.append(f"| {what} | {fmt(value, 2)} | {target} | "
                       f"{ {True: 'yes', False: '**no**', None: 'not measured'}[met] } |")
    if result["problems"]:
        out += ["", "### Problems seen", ""] + [f"- {p}" for p in result["problems"]]
    return "\n".join(out)
