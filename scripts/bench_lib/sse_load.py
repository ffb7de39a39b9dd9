"""A load generator for streamed OpenAI completions (`POST /v1/completions` with `"stream": true`), one process.

N streams, each its own HTTP/1.1 keep-alive connection (plain asyncio streams: no HTTP library, so the client
spends as little CPU as it can), ask one completion after another until the duration is over; a request in flight
then finishes (bounded by --drain-timeout). Each request records the time from sending to its first chunk with
text (time to first token), the gaps between its later ones (inter-token latency), their mean (time per output
token: from the first token to the last over the gaps between them) and their count: for the
benchmark's model each is one token (a chunk with no text, such as a last one holding only the finish reason, is
not counted). Tokens/s: every token of the run over its wall time, the requests in flight at the end of the
duration included (a server whose first tokens come late at high concurrency is still credited with the work it
did); the tokens that arrived within the duration alone are `window_tokens_per_s`. The process's own CPU time
(getrusage) over the run is reported beside them.

    python sse_load.py --port P --model M --streams 16 --duration 10 --max-tokens 200   # JSON on stdout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from typing import AsyncIterator

DONE = b"data: [DONE]"


class StreamError(Exception):
    """A response that is not a well-formed stream of completion chunks."""


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def has_text(event: bytes) -> bool:
    """Whether a completion chunk carries text (a token), read without parsing its JSON: its `"text":` is followed
    by a string that is not empty."""
    i = event.find(b'"text":')
    if i < 0:
        return False
    rest = event[i + 7:i + 10].lstrip()
    return rest.startswith(b'"') and not rest.startswith(b'""')


def request_bytes(host: str, port: int, model: str, prompt: str, max_tokens: int) -> bytes:
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise StreamError("the server closed the connection before answering")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise StreamError(f"not an HTTP status line: {status_line!r}")
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def body_pieces(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body as the bytes arrive: chunked, of a Content-Length, or up to the connection's close."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while data := await reader.read(65536):
            yield data


class Stream:
    """One client stream: a connection reused for one request after another."""

    def __init__(self, run: "Load") -> None:
        self.run = run
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None or self.reader.at_eof():
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.run.host, self.run.port)
        return self.reader, self.writer

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None

    async def one(self) -> None:
        """One streamed completion, its times added to the run's."""
        run = self.run
        reader, writer = await self._connect()
        sent = time.perf_counter()
        writer.write(run.request)
        status, headers = await read_head(reader)
        buffer = b""
        first: float | None = None
        last: float | None = None
        tokens = 0
        done = False
        async for data in body_pieces(reader, headers):
            now = time.perf_counter()
            buffer += data
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                event = event.strip()
                if not event:
                    continue
                if status != 200:
                    raise StreamError(f"status {status}: {event[:300]!r}")
                if event == DONE:
                    done = True
                    continue
                if not event.startswith(b"data: {") or b'"error"' in event[:20]:
                    raise StreamError(f"not a completion chunk: {event[:300]!r}")
                if not has_text(event):
                    continue  # a chunk with no text: the finish reason alone, the usage
                if last is None:
                    first = now
                    run.ttft.append(now - sent)
                else:
                    run.itl.append(now - last)
                last = now
                tokens += 1
                if now <= run.deadline:
                    run.tokens_in_window += 1
        if status != 200:
            raise StreamError(f"status {status}: {buffer[:300]!r}")
        if not done:
            raise StreamError(f"the stream ended without [DONE] after {tokens} tokens")
        if headers.get("connection", "").lower() == "close":
            await self.close()
        run.requests += 1
        run.tokens += tokens
        if first is not None and last is not None and tokens > 1:
            run.tpot.append((last - first) / (tokens - 1))
        run.token_counts.add(tokens)

    async def loop(self) -> None:
        run = self.run
        try:
            while time.perf_counter() < run.deadline:
                try:
                    await self.one()
                except (StreamError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    run.errors.append(f"{type(exc).__name__}: {exc}")
                    await self.close()
                    if len(run.errors) > 20:
                        return
        finally:
            await self.close()


class Load:
    def __init__(self, args: argparse.Namespace) -> None:
        self.host, self.port = args.host, args.port
        self.request = request_bytes(args.host, args.port, args.model, args.prompt, args.max_tokens)
        self.streams, self.duration, self.drain_timeout = args.streams, args.duration, args.drain_timeout
        self.deadline = 0.0
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.tpot: list[float] = []  # per request: (last token - first token) / (tokens - 1)
        self.tokens = self.tokens_in_window = self.requests = 0
        self.token_counts: set[int] = set()
        self.errors: list[str] = []

    async def main(self) -> dict:
        usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        self.deadline = t0 + self.duration
        tasks = [asyncio.ensure_future(Stream(self).loop()) for _ in range(self.streams)]
        done, pending = await asyncio.wait(tasks, timeout=self.duration + self.drain_timeout)
        for task in pending:
            task.cancel()
        if pending:
            self.errors.append(f"{len(pending)} stream(s) still busy {self.drain_timeout:g} s after the duration: "
                               "cancelled")
            await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if task.exception() is not None:
                self.errors.append(f"{type(task.exception()).__name__}: {task.exception()}")
        wall = time.perf_counter() - t0
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        ms = 1000.0
        return {
            "streams": self.streams, "duration_s": self.duration, "wall_s": wall, "requests": self.requests,
            "tokens": self.tokens, "tokens_in_window": self.tokens_in_window,
            "tokens_per_s": self.tokens / wall if wall else None,
            "window_tokens_per_s": self.tokens_in_window / self.duration if self.duration else None,
            "tokens_per_request": sorted(self.token_counts),
            "ttft_p50_ms": _scale(percentile(self.ttft, 50), ms), "ttft_p99_ms": _scale(percentile(self.ttft, 99), ms),
            "itl_p50_ms": _scale(percentile(self.itl, 50), ms), "itl_p99_ms": _scale(percentile(self.itl, 99), ms),
            "tpot_p50_ms": _scale(percentile(self.tpot, 50), ms),
            "tpot_p99_ms": _scale(percentile(self.tpot, 99), ms),
            "first_tokens": len(self.ttft), "client_cpu_s": cpu, "client_cores": cpu / wall if wall else None,
            "errors": self.errors[:10], "error_count": len(self.errors),
        }


def _scale(x: float | None, k: float) -> float | None:
    return None if x is None else x * k


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", default="Tell me a story")
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--duration", type=float, default=10.0, help="seconds during which new requests start")
    p.add_argument("--drain-timeout", type=float, default=60.0,
                   help="seconds the requests in flight at the end of the duration may take to finish")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    result = asyncio.run(Load(parse(argv)).main())
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 1 if result["error_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
