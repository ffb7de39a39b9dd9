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
import hashlib
import sys
import time
from typing import Any


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
    import pytriton
    from tritonclient.grpc import service_pb2 as pb

    from pytriton.core.registry import Model
    from pytriton.core.server_core import ServerCore
    from pytriton.core.types import ExecutionOutput, Tensor
    from pytriton.frontend.grpc import h2
    from pytriton.frontend.grpc.server import HealthService, h2_methods
    from pytriton.frontend.grpc.servicer import InferenceServicer
    from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
    from pytriton.scheduler.job import Delivery, ExecutionStats

    print(f"pytriton from {pytriton.__file__}")
    output = bytes(64)

    class Scheduler:  # answers what was submitted at the end of the loop turn, as one batch
        batching = object()
        ready = True
        queue_size = 0
        executions_in_flight = 0

        def __init__(self) -> None:
            self.jobs: list[Any] = []

        def submit(self, job: Any) -> None:
            job.enqueued_ns = time.perf_counter_ns()
            if not self.jobs:
                asyncio.get_running_loop().call_soon(self.run)
            self.jobs.append(job)

        def run(self) -> None:
            jobs, self.jobs = self.jobs, []
            for job in jobs:
                job.deliver(Delivery(ExecutionOutput([Tensor("OUTPUT", "FP32", (1, 16), output)]), ExecutionStats(), 0))

        def withdraw(self, job: Any) -> None:
            job.abandon()

        def fail_all(self, message: str) -> None:
            pass

    config = TritonModelConfig("double_small", inputs=[TensorSpec("INPUT", "FP32", (16,))],
                               outputs=[TensorSpec("OUTPUT", "FP32", (16,))], max_batch_size=64,
                               batcher=DynamicBatcher())
    core = ServerCore()
    await core.start()
    core.registry.add(Model(config=config, scheduler=Scheduler(), source=None, loaded=True))  # type: ignore[arg-type]
    methods = h2_methods(InferenceServicer(core), HealthService())

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.written = 0
            self.digest = hashlib.sha256()

        def write(self, data: Any) -> None:
            self.written += len(data)
            self.digest.update(data)

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return ("127.0.0.1", 1) if name == "peername" else default

        def get_write_buffer_size(self) -> int:
            return 0

        def set_write_buffer_limits(self, high: Any = None, low: Any = None) -> None:
            pass

        def is_closing(self) -> bool:
            return False

        def can_write_eof(self) -> bool:
            return False

    connection = h2.GrpcConnection(methods)
    transport = Transport()
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
    results = []
    profile = None
    for repeat in range(args.repeats):
        if args.profile and repeat == args.repeats - 1:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        start = time.thread_time_ns()
        await turns(args.rounds)
        results.append((time.thread_time_ns() - start) / (args.rounds * args.batch) / 1000)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
    assert not connection.streams, "requests left unanswered"
    stats = core.registry.get("double_small").stats
    print(f"{args.batch} requests per read; {per_answer:.0f} bytes written per answer (sha256 of the first 51 reads' "
          f"answers {digest}); {stats.inference_count} "
          f"inferences counted; us CPU per request: best {min(results):.2f}, median {sorted(results)[len(results) // 2]:.2f}")


if __name__ == "__main__":
    main()
