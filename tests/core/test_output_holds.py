"""Output holds (core/output_holds.py): a call whose caller left keeps the client bytes it names until its worker has
answered or is gone, and a call on those bytes waits outside the scheduler until then (issue 40). Driven through the
core with fake instances, real registered regions and no worker."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pytriton.core.calls import UnaryCall
from pytriton.core.output_holds import OutputHolds, span
from pytriton.core.server_core import ServerCore
from pytriton.core.shm_registry import CudaShmRegion, SystemShmRegion
from pytriton.core.types import ExecutionOutput, InferRequest, RegionRef, RegionSlice, RequestedOutput, Tensor
from pytriton.exceptions import ServerError, Status
from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
from pytriton.scheduler.instance import InstanceStatus
from pytriton.scheduler.job import DONE, HELD, RUNNING, ExecutionStats, Job
from tests.scheduler.fakes import FakeExecution, FakeInstance

SIZE = 64  # bytes of one tensor: 16 floats


class Source:
    """Fake instances for the model's scheduler; stopping them fails what they run (the workers are gone)."""

    def __init__(self, count: int):
        self.instances = [FakeInstance(f"m_0_{i}") for i in range(count)]
        self.handler: Any = None

    def bind(self, handler: Any) -> None:
        self.handler = handler

    async def start(self) -> None:
        for instance in self.instances:
            self.handler.add_instance(instance)

    async def stop(self, timeout_s: float = 10.0) -> None:
        for instance in self.instances:
            if not instance.dead:
                instance.die(self.handler)

    def describe(self) -> list[InstanceStatus]:
        return [InstanceStatus(i.label, not i.dead) for i in self.instances]

    def executions(self) -> list[FakeExecution]:
        return [e for i in self.instances for e in i.executions]


@pytest.fixture
def keys() -> Iterator[list[str]]:
    """Two POSIX shm objects of ours, 4 KiB each."""
    made = []
    for _ in range(2):
        key = f"/pt_test_holds_{uuid.uuid4().hex[:8]}"
        fd = os.open("/dev/shm" + key, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, 4096)
        os.close(fd)
        made.append(key)
    yield made
    for key in made:
        os.unlink("/dev/shm" + key)


async def _core(keys: list[str], instances: int = 2, batching: bool = False, timeout_s: float | None = None,
                gpu: bool = False) -> tuple[ServerCore, Source]:
    core = ServerCore(execution_timeout_s=timeout_s, gpu_available=gpu)
    await core.start()
    config = TritonModelConfig("m", inputs=[TensorSpec("INPUT", "FP32", (16,))],
                               outputs=[TensorSpec("OUTPUT", "FP32", (16,))], max_batch_size=8 if batching else 0,
                               batcher=DynamicBatcher() if batching else None)
    source = Source(instances)
    await core.add_model(config, source)  # type: ignore[arg-type]
    core.shm.register_system("r", keys[0], 0, 4096)
    core.shm.register_system("r_again", keys[0].lstrip("/"), 1024, 2048)  # the same object, from byte 1024 on
    core.shm.register_system("other", keys[1], 0, 4096)
    return core, source


def _request(out: tuple[str, int] | None = ("r", 0), into: tuple[str, int] | None = None,
             batch: bool = False) -> InferRequest:
    shape = (1, 16) if batch else (16,)
    tensor = Tensor("INPUT", "FP32", shape, data=None if into else bytes(SIZE),
                    region=RegionRef(into[0], into[1], SIZE) if into else None)
    outputs = []
    if out is not None:
        outputs.append(RequestedOutput("OUTPUT", {"shared_memory_region": out[0], "shared_memory_offset": out[1],
                                                  "shared_memory_byte_size": SIZE}))
    return InferRequest("m", inputs=[tensor], outputs=outputs)


def _begin(core: ServerCore, request: InferRequest) -> UnaryCall:
    return core.begin(request, core.registry.get("m"))


def _answer(execution: FakeExecution, count: int = 1) -> None:
    """The worker's answer: the outputs were written into the client's region."""
    execution.finished = True
    outputs = [ExecutionOutput([Tensor("OUTPUT", "FP32", (16,))]) for _ in range(count)]
    execution.sink.deliver(outputs, ExecutionStats(), True)


def _of(source: Source, call: UnaryCall) -> FakeExecution:
    """The execution that runs `call`."""
    payload = call._job.payload
    (execution,) = [e for e in source.executions() if any(p is payload for p in e.payloads)]
    return execution


def _in_use(core: ServerCore, name: str) -> int:
    return core.shm._regions[name].in_use


def test_a_call_into_the_bytes_of_a_withdrawn_running_call_waits_for_its_workers_answer(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request())
        (running,) = source.executions()
        first.cancel()  # its client left; its worker may be past its last look for a CANCEL
        assert running.cancelled
        second = _begin(core, _request(("r", 32)))  # (half of its bytes are the first call's)
        assert second._job.state == HELD and len(source.executions()) == 1  # not on the idle instance
        assert _in_use(core, "r") == 2
        _answer(running)  # the late write has landed
        assert second._job.state == RUNNING and len(source.executions()) == 2
        _answer(source.executions()[1])
        await asyncio.wait_for(second.future, 5)
        assert second.result().outputs[0].name == "OUTPUT"
        assert len(core.holds) == 0 and _in_use(core, "r") == 0 and core.in_flight == 0

    asyncio.run(main())


def test_the_same_bytes_named_through_another_region_or_key_spelling_wait_too(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request(("r", 1024)))
        first.cancel()
        held = _begin(core, _request(("r_again", 0)))  # byte 1024 of the same object, another name
        apart = _begin(core, _request(("r", 1024 + SIZE)))  # the bytes right after: free
        other = _begin(core, _request(("other", 1024)))  # another object
        assert held._job.state == HELD
        assert apart._job.state == RUNNING and other._job.state == RUNNING
        _answer(_of(source, first))
        assert held._job.state == RUNNING

    asyncio.run(main())


def test_calls_whose_callers_wait_run_side_by_side(keys):
    """perf_analyzer sends its concurrent requests into one output region: they are not serialized, as in Triton."""
    async def main() -> None:
        core, source = await _core(keys)
        calls = [_begin(core, _request()) for _ in range(4)]
        assert [c._job.state for c in calls] == [RUNNING] * 4  # two instances, two executions each (pipelined)
        assert len(source.executions()) == 4 and len(core.holds) == 1
        for execution in source.executions():
            _answer(execution)
        assert len(core.holds) == 0

    asyncio.run(main())


def test_a_call_reading_bytes_a_withdrawn_call_may_write_waits(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request(("r", 0)))
        first.cancel()
        reader = _begin(core, _request(out=None, into=("r", 0)))  # its input is the withdrawn call's output
        writer_elsewhere = _begin(core, _request(("other", 0), into=("r", SIZE)))  # reads bytes nobody writes
        plain = _begin(core, _request(out=None))  # no region at all: nothing to wait for, nothing held
        assert reader._job.state == HELD
        assert writer_elsewhere._job.state == RUNNING and plain._job.state == RUNNING
        assert plain._job._settle is None  # (the path without regions registers nothing)
        _answer(_of(source, first))
        assert reader._job.state == RUNNING

    asyncio.run(main())


def test_a_held_call_whose_caller_leaves_ends_at_once_and_counts_as_cancelled(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request())
        first.cancel()
        second = _begin(core, _request())
        third = _begin(core, _request())
        assert second._job.state == HELD and third._job.state == HELD
        second.cancel()
        assert second._job.state == DONE and _in_use(core, "r") == 2
        model = core.registry.get("m")
        assert model.stats.failures["CANCELED"] == 1
        _answer(source.executions()[0])
        assert third._job.state == RUNNING and len(source.executions()) == 2  # the withdrawn one never ran
        _answer(source.executions()[1])
        assert len(core.holds) == 0 and _in_use(core, "r") == 0 and core.in_flight == 0

    asyncio.run(main())


def test_held_calls_go_on_in_the_order_they_came(keys):
    async def main() -> None:
        core, source = await _core(keys, instances=1)
        first = _begin(core, _request())
        first.cancel()
        later = [_begin(core, _request()) for _ in range(3)]
        _answer(source.executions()[0])
        payloads = [e.payloads[0] for e in source.executions()[1:]]
        assert payloads == [c._job.payload for c in later[:2]]  # (room for two on the one instance; then its queue)
        assert later[2]._job.state == "queued"

    asyncio.run(main())


def test_a_call_withdrawn_while_held_is_not_waited_for_by_the_next(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request())
        first.cancel()
        second = _begin(core, _request())
        second.cancel()  # it never runs: nothing of it can be written
        third = _begin(core, _request())
        assert third._job.state == HELD  # (for the first call only)
        _answer(source.executions()[0])
        assert third._job.state == RUNNING

    asyncio.run(main())


def test_an_execution_timeout_keeps_the_bytes_held_until_the_worker_is_gone(keys):
    async def main() -> None:
        core, source = await _core(keys, timeout_s=0.05)
        first = _begin(core, _request())
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(first.future), 0)
        await asyncio.wait({first.future}, timeout=10)  # the timeout fails it
        with pytest.raises(ServerError) as info:
            first.result()
        assert info.value.status == Status.UNAVAILABLE and "execution timeout" in info.value.message
        stuck = source.executions()[0]
        assert stuck.instance.killed and not stuck.finished  # the kill is on its way; the worker may still write
        core.shm.unregister(SystemShmRegion, "r")
        assert core.shm.system_status("r")  # still registered: the stuck worker may write into it
        second = _begin(core, _request())
        assert second._job.state == HELD
        stuck.fail("the worker was killed")  # it is gone
        assert second._job.state == RUNNING
        _answer(_of(source, second))
        await asyncio.wait_for(second.future, 5)
        with pytest.raises(ServerError):
            core.shm.system_status("r")  # gone with its last user
        assert len(core.holds) == 0

    asyncio.run(main())


def test_a_batch_with_one_withdrawn_request_holds_its_bytes_until_the_batch_is_answered(keys):
    async def main() -> None:
        core, source = await _core(keys, instances=1, batching=True)
        blocker = _begin(core, _request(("other", 2048), batch=True))  # keeps the one instance busy
        first = _begin(core, _request(("r", 0), batch=True))
        kept = _begin(core, _request(("r", SIZE), batch=True))
        _answer(source.executions()[0])
        await asyncio.wait_for(blocker.future, 5)
        (batch,) = source.executions()[1:]
        assert len(batch.payloads) == 2
        first.cancel()
        second = _begin(core, _request(("r", 0), batch=True))
        beside = _begin(core, _request(("r", SIZE), batch=True))  # the live request's bytes: not held back
        assert second._job.state == HELD and beside._job.state != HELD
        _answer(batch, 2)
        assert kept.future.done() and second._job.state != HELD

    asyncio.run(main())


def test_a_held_call_fails_when_its_model_is_unloaded(keys):
    async def main() -> None:
        core, source = await _core(keys)
        first = _begin(core, _request())
        first.cancel()
        second = _begin(core, _request())
        await core.unload_model("m")  # its workers stop: the withdrawn call's execution fails
        await asyncio.wait({second.future}, timeout=5)
        with pytest.raises(ServerError) as info:
            second.result()
        assert info.value.status == Status.UNAVAILABLE and "unloaded" in info.value.message
        assert len(core.holds) == 0 and core.in_flight == 0

    asyncio.run(main())


def test_cuda_regions_follow_the_same_rule(keys):
    async def main() -> None:
        core, source = await _core(keys, gpu=True)
        core.shm.register_cuda("gpu", bytes(range(64)), 0, 4096)
        core.shm.register_cuda("gpu_other_device", bytes(range(64)), 1, 4096)
        first = _begin(core, _request(("gpu", 0)))
        first.cancel()
        second = _begin(core, _request(("gpu", 0)))
        elsewhere = _begin(core, _request(("gpu_other_device", 0)))
        assert second._job.state == HELD and elsewhere._job.state == RUNNING
        _answer(_of(source, first))
        assert second._job.state == RUNNING

    asyncio.run(main())


def test_spans_name_the_memory_not_the_region():
    system = SystemShmRegion("a", "/key", 100, 1000, 1)
    same = SystemShmRegion("b", "key", 0, 4096, 2)
    cuda = CudaShmRegion("c", bytes(64), 0, 4096, 3)
    assert span(RegionSlice(system, 10, 20)) == ("key", 110, 130) == span(RegionSlice(same, 110, 20))
    assert span(RegionSlice(cuda, 10, 20)) == ((bytes(64), 0), 10, 30)


def test_a_hold_released_while_another_call_on_the_bytes_was_withdrawn_meanwhile_still_waits():
    """A call held back for one withdrawn call goes on only once no orphaned hold overlaps it (another call on the same
    bytes may have been withdrawn while it waited)."""
    holds = OutputHolds()
    region = SystemShmRegion("a", "key", 0, 4096, 1)
    where = [RegionSlice(region, 0, SIZE)]
    jobs = [Job(None, loop=asyncio.new_event_loop()) for _ in range(3)]
    resumed: list[int] = []
    first, waits = holds.admit(jobs[0], where, [], lambda: resumed.append(0))
    second, _ = holds.admit(jobs[1], where, [], lambda: resumed.append(1))
    assert first is not None and second is not None and not waits
    jobs[0].abandon()
    third, waits = holds.admit(jobs[2], where, [], lambda: resumed.append(2))
    assert waits and third is not None
    jobs[1].abandon()  # withdrawn too, after the third call came
    holds.release(first)
    assert resumed == []  # the second call's worker may still write
    holds.release(second)
    assert resumed == [2]
    holds.release(third)
    assert len(holds) == 0
