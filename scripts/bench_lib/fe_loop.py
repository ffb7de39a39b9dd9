"""The gRPC front-end and the core in one process, without sockets or workers: CPU per ModelInfer request.

    .venv/bin/python scripts/bench_lib/fe_loop.py                        # this checkout
    .venv/bin/python scripts/bench_lib/fe_loop.py --code /tmp/main-export  # another checkout's pytriton (same venv)

A `GrpcConnection` (the HTTP/2 transport) with the server's method table (`h2_methods`, `InferenceServicer`,
`ServerCore`) is fed the bytes a gRPC client sends for `--batch` requests of 16 floats at a time (HEADERS with the
same HPACK block each time, as perf_analyzer's connections send them, DATA, the client's WINDOW_UPDATEs), the model's
scheduler is a stub that answers every job of a turn at once (one 16-float output each, as a batch of that many),
and the answers go to a transport that only counts bytes. What is timed (`time.thread_time_ns`, best of
`--repeats`) is everything the server process's event loop does for those requests but the worker round trip:
HTTP/2 in and out, conversion, validation, scheduling hand-off, statistics, the response. Each checkout is imported
on its own (`--code`), so two versions can be compared in alternation on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fe_harness import CountingTransport, stub_core, timed_repeats  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", help="a directory put first on sys.path (another checkout's pytriton)")
    parser.add_argument("--batch", type=int, default=20, help="requests per read (and per batch)")
    parser.add_argument("--rounds", type=int, default=200, help="reads per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", help="write a cProfile of one repeat to this file")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> None:
    import hpack
    from tritonclient.grpc import service_pb2 as pb

    import pytriton
    from pytriton.frontend.grpc.server import HealthService, h2_methods
    from pytriton.frontend.grpc.servicer import InferenceServicer
    from pytriton.frontend.h2 import connection as h2

    print(f"pytriton from {pytriton.__file__}")
    core = await stub_core()
    methods = h2_methods(InferenceServicer(core), HealthService())

    connection = h2.GrpcConnection(methods)
    transport = CountingTransport()
    connection.connection_made(transport)

    def frame(ftype: int, flags: int, stream: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload

    request = pb.ModelInferRequest(model_name="double_small")
    tensor = request.inputs.add(name="INPUT", datatype="FP32")
    tensor.shape.extend((1, 16))
    request.outputs.add(name="OUTPUT")
    request.raw_input_contents.append(bytes(64))
    message = request.SerializeToString()
    body = b"\x00" + len(message).to_bytes(4, "big") + message
    encoder = hpack.Encoder()
    headers = [(":method", "POST"), (":scheme", "http"), (":path", "/inference.GRPCInferenceService/ModelInfer"),
               (":authority", "127.0.0.1"), ("content-type", "application/grpc"), ("te", "trailers"),
               ("user-agent", "grpc-c++/1.67.1")]
    blocks = [encoder.encode(headers)]  # the first call's: literals the decoder adds to its table
    block = encoder.encode(headers)  # then table references only, as a client's repeated calls
    first = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
    stream_id = [1]

    def batch() -> bytes:
        out = []
        for _ in range(args.batch):
            sid = stream_id[0]
            stream_id[0] += 2
            out.append(frame(1, 4, sid, blocks.pop() if blocks else block))  # HEADERS, END_HEADERS
            out.append(frame(0, 1, sid, body))  # DATA, END_STREAM
            out.append(frame(8, 0, 0, (200).to_bytes(4, "big")))  # the client's WINDOW_UPDATE for our answer
        return b"".join(out)

    def feed(data: bytes) -> None:
        view = memoryview(data)
        while view:
            buffer = connection.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            connection.buffer_updated(n)
            view = view[n:]

    async def turns(count: int) -> None:
        for _ in range(count):
            feed(batch())
            for _ in range(4):  # the answers: scheduler run, callbacks or tasks, the writer's flush
                await asyncio.sleep(0)

    feed(first)
    await turns(50)  # warm-up (templates, layouts)
    written = transport.written
    await turns(1)
    per_answer = (transport.written - written) / args.batch
    digest = transport.digest.hexdigest()[:16]  # of every byte written so far: two versions answer alike
    results = await timed_repeats(turns, args.repeats, args.rounds, args.batch, args.profile)
    assert not connection.streams, "requests left unanswered"
    stats = core.registry.get("double_small").stats
    print(f"{args.batch} requests per read; {per_answer:.0f} bytes written per answer (sha256 of the first 51 reads' "
          f"answers {digest}); {stats.inference_count} "
          f"inferences counted; us CPU per request: best {min(results):.2f}, median {sorted(results)[len(results) // 2]:.2f}")


if __name__ == "__main__":
    main()
