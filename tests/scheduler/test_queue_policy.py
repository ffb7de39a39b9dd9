"""The scheduler under a queue policy, over fake instances and a fake clock: priority levels, max queue size,
timeouts (REJECT and DELAY), a request's own timeout, and the accounting a withdrawn or rejected job leaves."""

from __future__ import annotations

import asyncio
import re

import pytest

from pytriton.exceptions import PyTritonError, ServerError, Status
from pytriton.model_config import DynamicBatcher, QueuePolicy, TimeoutAction
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.repository.config import read_model_config, to_model_config
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.instance import InstanceGoneError
from pytriton.scheduler.job import DONE
from pytriton.scheduler.queue_policy import LevelPolicy, PolicyQueue, QueueRules, queue_rules, request_queueing
from tests.scheduler.fakes import FakeInstance, make_job, turns

LONG_US = 60_000_000


def run(coroutine):
    return asyncio.run(coroutine)


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance_us(self, us: int) -> None:
        self.ns += us * 1000


def scheduler_with(rules: QueueRules, batching: BatchPolicy | None = None
                   ) -> tuple[ModelScheduler, FakeInstance, Clock]:  # fmt: skip
    scheduler = ModelScheduler("m", batching, pipeline_depth=1, queueing=rules)
    clock = Clock()
    assert isinstance(scheduler._queue, PolicyQueue)
    scheduler._queue._clock = clock
    scheduler._queue.call_later = lambda *args: asyncio.get_running_loop().call_later(3600, lambda: None)  # never
    instance = FakeInstance("m_0")
    scheduler.add_instance(instance)
    return scheduler, instance, clock


def job_of(payload, priority: int = 0, timeout_us: int = 0):
    job, ended = make_job(payload)
    job.priority, job.timeout_us = priority, timeout_us
    return job, ended


def order(instance: FakeInstance) -> list:
    return [payload for execution in instance.executions for payload in execution.payloads]


def finish_all(instance: FakeInstance) -> None:
    while instance.running:
        instance.running[0].reply()


def test_the_most_urgent_level_runs_first_and_fifo_within_a_level():
    async def main():
        scheduler, instance, _ = scheduler_with(QueueRules(priority_levels=3, default_level=2))
        jobs = [job_of("busy")[0], job_of("low", 3)[0], job_of("default", 0)[0], job_of("high", 1)[0],
                job_of("past-levels", 9)[0], job_of("high2", 1)[0]]
        for job in jobs:
            scheduler.submit(job)
        assert scheduler.queue_size == 5
        finish_all(instance)
        assert order(instance) == ["busy", "high", "high2", "default", "past-levels", "low"]
        for job in jobs:
            await job.future

    run(main())


def test_a_batch_takes_the_urgent_levels_first():
    async def main():
        scheduler, instance, _ = scheduler_with(QueueRules(priority_levels=2, default_level=2), BatchPolicy(4))
        scheduler.submit(job_of("busy")[0])
        for payload, priority in (("a", 2), ("b", 2), ("c", 1), ("d", 2), ("e", 1)):
            scheduler.submit(job_of(payload, priority)[0])
        finish_all(instance)
        assert [e.payloads for e in instance.executions] == [["busy"], ["c", "e", "a", "b"], ["d"]]

    run(main())


def test_a_level_past_its_max_queue_size_refuses_at_once_and_a_withdrawn_job_frees_its_place():
    async def main():
        rules = QueueRules(priority_levels=2, default_level=2, default=LevelPolicy(max_queue_size=1),
                           levels={1: LevelPolicy(max_queue_size=2)})
        scheduler, instance, _ = scheduler_with(rules)
        scheduler.submit(job_of("busy")[0])  # runs: not in the queue
        waiting, _ = job_of("waits")
        scheduler.submit(waiting)
        refused, ended = job_of("refused")
        with pytest.raises(ServerError) as info:
            scheduler.submit(refused)
        assert info.value.status == Status.UNAVAILABLE
        assert str(info.value) == "[request id: <id_unknown>] Exceeds maximum queue size"
        scheduler.submit(job_of("urgent1", 1)[0])  # level 1 has its own bound
        scheduler.submit(job_of("urgent2", 1)[0])
        with pytest.raises(ServerError):
            scheduler.submit(job_of("urgent3", 1)[0])
        scheduler.withdraw(waiting)
        scheduler.submit(job_of("takes its place")[0])
        assert scheduler.queue_size == 3
        finish_all(instance)
        assert order(instance) == ["busy", "urgent1", "urgent2", "takes its place"]

    run(main())


def test_reject_ends_a_job_past_its_timeout_which_never_runs():
    async def main():
        scheduler, instance, clock = scheduler_with(QueueRules(default=LevelPolicy(timeout_us=LONG_US)))
        scheduler.submit(job_of("busy")[0])
        late, ended = job_of("late")
        scheduler.submit(late)
        clock.advance_us(LONG_US + 1)
        scheduler._queue.reject_expired()  # what its timer does at the deadline
        with pytest.raises(ServerError) as info:
            await late.future
        assert info.value.status == Status.UNAVAILABLE and str(info.value) == "Request timeout expired"
        assert ended == [1] and late.state == DONE and scheduler.queue_size == 0
        after, _ = job_of("after")
        scheduler.submit(after)
        finish_all(instance)
        assert order(instance) == ["busy", "after"]
        assert scheduler._queued_weight == 0 and scheduler._withdrawn == 0

    run(main())


def test_reject_applies_when_the_job_reaches_the_front_even_before_its_timer():
    async def main():
        scheduler, instance, clock = scheduler_with(QueueRules(default=LevelPolicy(timeout_us=LONG_US)))
        scheduler.submit(job_of("busy")[0])
        late, _ = job_of("late")
        scheduler.submit(late)
        clock.advance_us(LONG_US + 1)
        finish_all(instance)
        assert order(instance) == ["busy"]
        with pytest.raises(ServerError, match="Request timeout expired"):
            await late.future
        assert scheduler.queue_size == 0 and scheduler._withdrawn == 0

    run(main())


def test_a_real_timer_rejects_at_the_deadline():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1, queueing=QueueRules(default=LevelPolicy(timeout_us=1000)))
        instance = FakeInstance("m_0")
        scheduler.add_instance(instance)
        scheduler.submit(job_of("busy")[0])
        late, _ = job_of("late")
        scheduler.submit(late)
        with pytest.raises(ServerError, match="Request timeout expired"):
            await asyncio.wait_for(late.future, 30)
        assert instance.running and order(instance) == ["busy"]  # the instance was busy all along

    run(main())


def test_delay_puts_a_job_past_its_timeout_behind_the_others_of_its_level():
    async def main():
        rules = QueueRules(priority_levels=2, default_level=2,
                           default=LevelPolicy(timeout_us=LONG_US, allow_override=True, delay=True))
        scheduler, instance, clock = scheduler_with(rules)
        scheduler.submit(job_of("busy")[0])
        for payload, priority, timeout in (("expires", 2, 1000), ("waits", 2, 0), ("urgent", 1, 0)):
            scheduler.submit(job_of(payload, priority, timeout)[0])
        clock.advance_us(1001)
        scheduler._queue.reject_expired()  # (nothing to reject under DELAY)
        assert scheduler.queue_size == 3
        finish_all(instance)
        assert order(instance) == ["busy", "urgent", "waits", "expires"]

    run(main())


def test_at_a_delay_jobs_timeout_the_others_of_its_level_batch_without_it():
    # As Triton (its qa/L0_model_queue test_priority_with_policy): at the deadline the DELAY job moves behind, and
    # the jobs before and after it that make a preferred batch start then, not when something else wakes the queue.
    async def main():
        rules = QueueRules(default=LevelPolicy(timeout_us=LONG_US, allow_override=True, delay=True))
        batching = BatchPolicy(8, max_queue_delay_us=LONG_US, preferred_batch_sizes=(4, 8))
        scheduler, instance, clock = scheduler_with(rules, batching)
        for payload, size, timeout in (("first", 2, 0), ("short", 1, 1000), ("third", 2, 0)):
            job, _ = make_job(payload, batch_size=size)
            job.timeout_us = timeout
            scheduler.submit(job)
        await turns()
        assert instance.executions == []  # 2, 3, 5: no preferred size yet
        clock.advance_us(1001)
        scheduler._queue.reject_expired()  # what the job's timer does at its deadline
        assert [e.payloads for e in instance.executions] == [["first", "third"]]

    run(main())


def test_a_request_timeout_only_shortens_the_policy_timeout_and_only_when_allowed():
    assert LevelPolicy(timeout_us=5000, allow_override=True).timeout_of(1000) == 1000
    assert LevelPolicy(timeout_us=5000, allow_override=True).timeout_of(9000) == 5000
    assert LevelPolicy(timeout_us=5000, allow_override=False).timeout_of(1000) == 5000
    assert LevelPolicy(timeout_us=0, allow_override=True).timeout_of(1000) == 0  # as Triton: no timeout to shorten

    async def main():
        scheduler, instance, clock = scheduler_with(QueueRules(default=LevelPolicy(timeout_us=LONG_US)))
        scheduler.submit(job_of("busy")[0])
        asks_short, _ = job_of("asks short", timeout_us=10)
        scheduler.submit(asks_short)
        clock.advance_us(100)
        scheduler._queue.reject_expired()
        finish_all(instance)
        assert order(instance) == ["busy", "asks short"]  # not allowed to override: the policy's timeout holds
        await asks_short.future

    run(main())


def test_a_requeued_job_goes_back_to_the_front_of_its_level():
    class Leaving(FakeInstance):
        gone = False

        def execute(self, payloads, sink):
            if self.gone:
                raise InstanceGoneError("worker exited")
            return super().execute(payloads, sink)

    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1, queueing=QueueRules(priority_levels=2, default_level=2))
        leaving = Leaving("m_0")
        scheduler.add_instance(leaving)
        scheduler.submit(job_of("busy")[0])
        for payload, priority in (("low", 2), ("high", 1), ("high2", 1)):
            scheduler.submit(job_of(payload, priority)[0])
        leaving.gone = True
        leaving.running[0].reply()  # "high" is taken, and goes back: the instance can take no work
        assert scheduler.queue_size == 3 and scheduler.instance_count == 0
        other = FakeInstance("m_1")
        scheduler.add_instance(other)
        finish_all(other)
        assert order(other) == ["high", "high2", "low"]
        await turns()

    run(main())


def test_many_withdrawn_jobs_are_compacted_and_accounting_holds():
    async def main():
        scheduler, instance, _ = scheduler_with(QueueRules(priority_levels=2, default_level=1,
                                                           default=LevelPolicy(max_queue_size=200)))
        scheduler.submit(job_of("busy")[0])
        jobs = [job_of(i, 1 + i % 2)[0] for i in range(150)]
        for job in jobs:
            scheduler.submit(job)
        for job in jobs[:140]:
            scheduler.withdraw(job)
        assert scheduler.queue_size == 10 and len(scheduler._queue) < 150
        finish_all(instance)
        assert order(instance) == ["busy", 140, 142, 144, 146, 148, 141, 143, 145, 147, 149]
        assert scheduler.queue_size == 0 and scheduler._queued_weight == 0

    run(main())


def test_rules_from_the_model_configuration():
    assert queue_rules(None) is None
    assert queue_rules(DynamicBatcher()) is None  # nothing to apply: the plain FIFO
    batcher = DynamicBatcher(priority_levels=3, default_priority_level=2,
                             default_queue_policy=QueuePolicy(max_queue_size=4, default_timeout_microseconds=7,
                                                              allow_timeout_override=True,
                                                              timeout_action=TimeoutAction.DELAY),
                             priority_queue_policy={1: QueuePolicy(max_queue_size=1)})
    rules = queue_rules(batcher)
    assert rules == QueueRules(3, 2, LevelPolicy(4, 7, True, True), {1: LevelPolicy(max_queue_size=1)})
    assert rules.level_of(0) == 2 and rules.level_of(1) == 1 and rules.level_of(4) == 2
    assert rules.policy(1) == LevelPolicy(max_queue_size=1) and rules.policy(3) == LevelPolicy(4, 7, True, True)
    assert request_queueing({"priority": 2, "timeout": 100}) == (2, 100)
    assert request_queueing({"priority": "x", "timeout": True}) == (0, 0)
    assert request_queueing({}) == (0, 0)


PBTXT = """
name: "m"
backend: "python"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]
dynamic_batching {
  priority_levels: 2
  default_priority_level: %s
  default_queue_policy { max_queue_size: 32 default_timeout_microseconds: 2000000 allow_timeout_override: true }
  priority_queue_policy { key: 1 value { timeout_action: DELAY default_timeout_microseconds: 500000 } }
  %s
}
"""


def _repository_config(tmp_path, extra: str = "", default_level: int = 2):
    model_dir = tmp_path / "m"
    model_dir.mkdir(exist_ok=True)
    (model_dir / "config.pbtxt").write_text(PBTXT % (default_level, extra))
    path = str(model_dir / "config.pbtxt")
    return to_model_config(read_model_config(path), path, str(model_dir), 1, lambda: [])


def test_a_repository_config_gives_the_same_rules_as_the_guide_shows(tmp_path):
    rules = queue_rules(_repository_config(tmp_path).batcher)
    assert rules == QueueRules(2, 2, LevelPolicy(32, 2_000_000, True, False), {1: LevelPolicy(0, 500_000, False, True)})


@pytest.mark.parametrize("extra, level, message", [
    ("", 3, "default priority level must be in range [1, 2] for m"),
    ("", 0, "default priority level must be in range [1, 2] for m"),
    ("priority_queue_policy { key: 5 value { max_queue_size: 1 } }", 2,
     "priority queue policy must have priority level in range [1, 2] for m"),
    ("preserve_ordering: true", 2, "Only one priority level is allowed when 'preserve_ordering' is true for m"),
])
def test_triton_refuses_these_settings_and_so_do_we(tmp_path, extra, level, message):
    with pytest.raises(PyTritonError, match=re.escape(message)):
        _repository_config(tmp_path, extra, level)
    with pytest.raises(PyTritonError, match="DELAY as timeout action when 'preserve_ordering'"):
        delay = QueuePolicy(default_timeout_microseconds=1, timeout_action=TimeoutAction.DELAY)
        TritonModelConfig("m", inputs=[], outputs=[TensorSpec("Y", "FP32", (1,))], max_batch_size=1,
                          batcher=DynamicBatcher(preserve_ordering=True, default_queue_policy=delay))


def test_cli_flags_set_the_default_policy_over_a_declared_batcher():
    from pytriton.cli.queue_options import apply_queue_flags, queue_flags_given

    declared = DynamicBatcher(max_queue_delay_microseconds=5, priority_queue_policy={1: QueuePolicy(max_queue_size=1)},
                              default_queue_policy=QueuePolicy(default_timeout_microseconds=9))
    flags = {"priority_levels": 2, "default_priority_level": 1, "max_queue_size": 3, "timeout_action": "delay"}
    batcher = apply_queue_flags(declared, flags)
    assert batcher.priority_levels == 2 and batcher.default_priority_level == 1
    assert batcher.max_queue_delay_microseconds == 5 and batcher.priority_queue_policy == declared.priority_queue_policy
    assert batcher.default_queue_policy == QueuePolicy(TimeoutAction.DELAY, 9, False, 3)
    assert declared.default_queue_policy == QueuePolicy(default_timeout_microseconds=9)  # (the declaration unchanged)
    assert queue_flags_given(flags) == ["--priority-levels", "--default-priority-level", "--max-queue-size",
                                        "--timeout-action"]
    assert apply_queue_flags(declared, {"priority_levels": 2}).default_queue_policy == declared.default_queue_policy
