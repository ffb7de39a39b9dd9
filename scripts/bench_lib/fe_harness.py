"""What `fe_loop.py` (gRPC) and `http_fe_loop.py` (HTTP) share: a `ServerCore` whose one model, `double_small`, is
answered by a stub scheduler (every job of a loop turn at once, one 16-float output each), a transport that only
counts and hashes the bytes written, and the timed repeats. pytriton is imported inside the functions, so that a
script can first put another checkout on sys.path (`--code`)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any, Awaitable, Callable


async def stub_core() -> Any:
    """A started `ServerCore` serving `double_small` (fp32[16] in and out, max_batch_size 64, dynamic batcher)."""
    from pytriton.core.registry import Model
    from pytriton.core.server_core import ServerCore
    from pytriton.core.types import ExecutionOutput, Tensor
    from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
    from pytriton.scheduler.job import Delivery, ExecutionStats

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
    return core


class CountingTransport(asyncio.Transport):
    """Takes every write at once; counts the bytes and hashes them (two versions must answer alike)."""

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

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def timed_repeats(turns: Callable[[int], Awaitable[None]], repeats: int, rounds: int, requests_per_round: int,
                        profile_path: str | None) -> list[float]:  # fmt: skip
    """µs of this thread's CPU per request for each repeat of `turns(rounds)`; the last repeat under cProfile when
    `profile_path` is given (its stats written there)."""
    results = []
    for repeat in range(repeats):
        profile = None
        if profile_path and repeat == repeats - 1:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        start = time.thread_time_ns()
        await turns(rounds)
        results.append((time.thread_time_ns() - start) / (rounds * requests_per_round) / 1000)
        if profile is not None:
            profile.disable()
            profile.dump_stats(profile_path)
    return results
