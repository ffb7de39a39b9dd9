"""The HTTP front-end and the core in one process, without sockets or workers: CPU per binary infer request.

    .venv/bin/python scripts/bench_lib/http_fe_loop.py                        # this checkout
    .venv/bin/python scripts/bench_lib/http_fe_loop.py --code /tmp/main-export  # another checkout's pytriton

`--connections` `HttpConnection`s (the HTTP/1.1 server) of one listener, answering with the server's `HttpApp` and
`ServerCore`, are each fed one binary infer request of 16 floats per round (the request line and headers a
perf_analyzer context sends, the same JSON header every time, one request in flight per connection), the model's
scheduler is a stub that answers every job of a turn at once (one 16-float output each, as a batch of that many),
and the answers go to a transport that only counts and hashes bytes. What is timed (`time.thread_time_ns`, best of
`--repeats`) is everything the server process's event loop does for those requests but the socket calls and the
worker round trip: parsing, routing, conversion, validation, the hand-off to the scheduler, statistics, the answer.
Each checkout is imported on its own (`--code`), so two versions can be compared in alternation on a shared
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fe_harness import CountingTransport, stub_core, timed_repeats  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", help="a directory put first on sys.path (another checkout's pytriton)")
    parser.add_argument("--connections", type=int, default=64, help="connections, one request in flight each")
    parser.add_argument("--rounds", type=int, default=100, help="requests per connection per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", help="write a cProfile of one repeat to this file")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> None:
    import pytriton
    from pytriton.core.settings import LogSettings, TraceSettings
    from pytriton.frontend.http.app import HttpApp
    from pytriton.frontend.http1 import HttpLimits
    from pytriton.frontend.http1.budget import BufferBudget
    from pytriton.frontend.http1.connection import HttpConnection
    from pytriton.frontend.http1.reader import SharedReadBuffer

    print(f"pytriton from {pytriton.__file__}")
    core = await stub_core()
    app = HttpApp(core, LogSettings(), TraceSettings())

    limits = HttpLimits()
    read_buffer = SharedReadBuffer()
    budget = BufferBudget(limits.max_buffered_bytes)
    connections = []
    transports = []
    for _ in range(args.connections):
        try:
            connection = HttpConnection(app.handle, limits, read_buffer, set(), "", budget, app.begin)  # type: ignore
        except (TypeError, AttributeError):  # a checkout without `begin`
            connection = HttpConnection(app.handle, limits, read_buffer, set(), "", budget)
        transport = CountingTransport()
        connection.connection_made(transport)
        connections.append(connection)
        transports.append(transport)

    header = (b'{"inputs":[{"name":"INPUT","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}}],'
              b'"outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}}]}')
    body = header + bytes(64)
    wire = (b"POST /v2/models/double_small/infer HTTP/1.1\r\nHost: localhost:8000\r\nAccept: */*\r\n"
            b"Inference-Header-Content-Length: %d\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % (len(header), len(body))) + body

    def feed(connection: Any) -> None:
        view = connection.get_buffer(len(wire))
        view[: len(wire)] = wire
        connection.buffer_updated(len(wire))
        del view

    async def turns(count: int) -> None:
        for _ in range(count):
            for connection in connections:
                feed(connection)
            for _ in range(6):  # the answers: begin or task, scheduler run, callbacks or task wake-ups
                await asyncio.sleep(0)

    await turns(20)  # warm-up (caches, layouts)
    written = sum(t.written for t in transports)
    await turns(1)
    per_answer = (sum(t.written for t in transports) - written) / args.connections
    digest = transports[0].digest.hexdigest()[:16]  # of every byte written so far: two versions answer alike
    results = await timed_repeats(turns, args.repeats, args.rounds, args.connections, args.profile)
    assert all(not c.queue and c.task is None for c in connections), "requests left unanswered"
    stats = core.registry.get("double_small").stats
    print(f"{args.connections} connections; {per_answer:.0f} bytes written per answer (sha256 of the first "
          f"connection's answers {digest}); {stats.inference_count} inferences counted; us CPU per request: best "
          f"{min(results):.2f}, median {sorted(results)[len(results) // 2]:.2f}")


if __name__ == "__main__":
    main()
