"""`scripts/bench --streaming` (scripts/bench_lib/streaming.py, sse_load.py, stream_report.py): the load generator
reads streamed completions as a server sends them (chunked, events split anywhere, errors named); the quick mode
measures ours alone, and beside Triton's OpenAI frontend where its venv and checkout are there (scripts/bench makes
them: .bench/triton-openai, .bench/triton-server-src); the report's section lands in docs/benchmarks-triton.md
beside the other suites'."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench_lib import sse_load, stream_report, triton_report
from tests._support.paths import REPO

STREAMING = REPO / "scripts" / "bench_lib" / "streaming.py"
TRITON_PYTHON = REPO / ".bench" / "triton-openai" / "bin" / "python"
TRITON_SRC = REPO / ".bench" / "triton-server-src"
TRITON_MAIN = TRITON_SRC / "python" / "openai" / "openai_frontend" / "main.py"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def serve_once(answers: list[bytes]):  # type: ignore[no-untyped-def]
    """A loopback server that answers each request of a connection with the next of `answers` (raw bytes)."""
    queue = list(answers)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while queue:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            answer = queue.pop(0)
            for i in range(0, len(answer), 7):  # in small writes: events split across reads
                writer.write(answer[i:i + 7])
                await writer.drain()
        writer.close()

    return asyncio.start_server(handle, "127.0.0.1", 0)


def run_load(answers: list[bytes]) -> dict:
    """The client's figures after asking `answers`' server once per answer on one connection."""
    async def main() -> dict:
        server = await serve_once(answers)
        port = server.sockets[0].getsockname()[1]
        load = sse_load.Load(sse_load.parse(["--port", str(port), "--model", "m"]))
        load.deadline = float("inf")  # every token counts as within the duration
        async with server:
            stream = sse_load.Stream(load)
            try:
                for _ in answers:
                    try:
                        await stream.one()
                    except sse_load.StreamError as exc:
                        load.errors.append(str(exc))
            finally:
                await stream.close()
        return {"requests": load.requests, "tokens": load.tokens, "ttft": len(load.ttft), "itl": len(load.itl),
                "tpot": len(load.tpot),
                "errors": load.errors, "counts": sorted(load.token_counts)}
    return asyncio.run(main())


def sse(*events: str) -> bytes:
    return b"".join(f"data: {e}\n\n".encode() for e in events)


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_the_client_counts_each_event_of_a_chunked_stream_once_however_the_bytes_are_split():
    events = [json.dumps({"choices": [{"text": f" t{i}"}]}, separators=(",", ":")) for i in range(5)]
    finish = json.dumps({"choices": [{"text": "", "finish_reason": "stop"}]})  # no token
    body = sse(*events[:2]) + sse(*events[2:], finish, "[DONE]")
    answer = OK_HEAD + chunk(body[:10]) + chunk(body[10:]) + b"0\r\n\r\n"
    got = run_load([answer, answer])  # two requests on one keep-alive connection
    assert got == {"requests": 2, "tokens": 10, "ttft": 2, "itl": 8, "tpot": 2, "errors": [], "counts": [5]}


def test_the_client_names_an_error_status_and_a_stream_cut_before_done():
    error = b'{"error": "no model"}'
    refused = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(error), error)
    cut = OK_HEAD + chunk(sse('{"choices": [{"text": "a"}]}')) + b"0\r\n\r\n"
    got = run_load([refused, cut])
    assert got["requests"] == 0
    assert got["errors"][0].startswith("status 400: ") and "no model" in got["errors"][0]
    assert got["errors"][1] == "the stream ended without [DONE] after 1 tokens"


def test_a_chunk_is_a_token_when_its_text_is_not_empty():
    assert sse_load.has_text(b'data: {"choices":[{"text":" t1","finish_reason":null}]}')
    assert sse_load.has_text(b'data: {"choices": [{"text": "x"}]}')
    assert not sse_load.has_text(b'data: {"choices":[{"text":"","finish_reason":"stop"}]}')
    assert not sse_load.has_text(b'data: {"choices": [{"text": ""}]}')
    assert not sse_load.has_text(b'data: {"choices":[],"usage":{"completion_tokens":3}}')


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (sse_load.percentile(values, 50), sse_load.percentile(values, 99)) == (50.0, 99.0)
    assert sse_load.percentile([3.0], 99) == 3.0 and sse_load.percentile([], 50) is None


def made_result(ours_tps: float, triton_tps: float, ours_ttft: float, triton_ttft: float) -> dict:
    def sample(tps: float, ttft: float) -> dict:
        return {"tokens_per_s": tps, "ttft_p50_ms": ttft / 2, "ttft_p99_ms": ttft, "itl_p50_ms": 0.01,
                "itl_p99_ms": 1.0, "tpot_p50_ms": 0.1, "tpot_p99_ms": 0.2, "requests": 10, "client_cores": 0.2,
                "server_cores": 0.9, "load": 1.0,
                "error_count": 0}
    return {"samples": {"ours/64": sample(ours_tps, ours_ttft), "triton/64": sample(triton_tps, triton_ttft)},
            "servers": ["ours", "triton"], "streams": [64], "duration_s": 10, "max_tokens": 200, "instances": 2,
            "elapsed_s": 60, "uptime_start": "0.50 0.40 0.30", "uptime_end": "0.60 0.40 0.30", "problems": [],
            "machine": {"cpus": 2}}


@pytest.mark.parametrize(("ours_tps", "ours_ttft", "met"), [(3000.0, 30.0, ("yes", "yes")),
                                                            (2900.0, 40.0, ("**no**", "**no**"))])
def test_the_report_says_whether_the_targets_at_64_streams_are_met(ours_tps, ours_ttft, met):
    doc = stream_report.markdown(made_result(ours_tps, 1000.0, ours_ttft, 100.0))
    rows = {line.split(" | ")[0]: line for line in doc.splitlines() if line.startswith("| tokens/s at 64")
            or line.startswith("| p99 time to first token at 64")}
    assert rows["| tokens/s at 64 streams, ours / Triton's"].endswith(f"| ≥ 3 | {met[0]} |")
    assert rows["| p99 time to first token at 64 streams, ours / Triton's"].endswith(f"| ≤ 1/3 | {met[1]} |")
    assert "must be run again on a quiet machine" not in doc  # load 0.6 on 2 CPUs


def test_the_streaming_section_is_written_beside_the_other_suites(tmp_path):
    doc = tmp_path / "report.md"
    triton_report.write_section(doc, "vs-triton", "VS TEXT")
    triton_report.write_section(doc, "streaming", stream_report.markdown(made_result(1.0, 1.0, 1.0, 1.0)))
    triton_report.write_section(doc, "many-models", "MANY TEXT")
    text = doc.read_text()
    assert "VS TEXT" in text and "MANY TEXT" in text
    start, end = text.index("<!-- streaming: start -->"), text.index("<!-- streaming: end -->")
    assert "## Streamed completions" in text[start:end]


def quick(tmp_path: Path, servers: str) -> tuple[dict, str, str]:
    """The quick mode into tmp_path: (results.json, stdout, the report); it must exit 0 (no error, no leftover
    process or /dev/shm file of either server)."""
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(STREAMING), "--quick", "--servers", servers, "--out-dir", str(out),
                          "--triton-doc", str(tmp_path / "report.md")],
                         capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return json.loads((out / "results.json").read_text()), run.stdout, (tmp_path / "report.md").read_text()


def check_side(result: dict, server: str) -> None:
    for streams in (1, 16):
        s = result["samples"][f"{server}/{streams}"]
        assert s["error_count"] == 0 and s["requests"] >= streams, s
        assert s["tokens_per_request"] == [200] and s["tokens"] == 200 * s["requests"] and s["tokens_per_s"] > 0, s
        assert s["ttft_p50_ms"] <= s["ttft_p99_ms"] and s["itl_p50_ms"] <= s["itl_p99_ms"], s
        assert 0 <= s["tpot_p50_ms"] <= s["tpot_p99_ms"], s
        assert 0 < s["client_cores"] and 0 < s["server_cores"], s


@pytest.mark.slow
def test_quick_mode_measures_ours_alone(tmp_path):
    result, out, doc = quick(tmp_path, "ours")
    assert sorted(result["samples"]) == ["ours/1", "ours/16"] and result["problems"] == []
    check_side(result, "ours")
    assert "| 16 | ours |" in doc and "| 16 | Triton |" not in doc and "### Targets" not in doc
    assert "16 ours" in " ".join(out.split())


@pytest.mark.slow
@pytest.mark.skipif(not TRITON_PYTHON.exists() or not TRITON_MAIN.is_file(),
                    reason="Triton's OpenAI frontend is not set up (.bench/triton-openai and .bench/triton-server-src: "
                           "`scripts/bench --streaming` makes them)")
def test_quick_mode_measures_ours_beside_tritons_openai_frontend(tmp_path):
    result, _, doc = quick(tmp_path, "ours,triton")
    check_side(result, "ours")
    check_side(result, "triton")
    ratios = next(line for line in doc.splitlines() if line.startswith("| 16 | ") and "ours" not in line
                  and "Triton" not in line)
    assert all(float(cell) > 0 for cell in ratios.strip("|").split("|")[1:]), ratios
    assert "| tokens/s at 64 streams, ours / Triton's | – | ≥ 3 | not measured |" in doc
