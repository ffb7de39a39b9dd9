"""Requests an instance gives back (RESCHEDULED): run again in their iterative sequence's slot, or failed in Triton's
words by a scheduler without iterative sequences."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.model_config.sequence import SequenceBatcher
from pytriton.scheduler.dispatcher import RESCHEDULE_REFUSED, ModelScheduler
from pytriton.scheduler.job import DONE, NO_RESULT, RESCHEDULED, ExecutionStats
from pytriton.scheduler.sequence import SequenceScheduler
from tests.scheduler.fakes import Clock, FakeInstance, FakeRequests, FakeResult, make_job


class Requests(FakeRequests):
    """FakeRequests whose prepare takes a prepared payload too (a request given back is prepared again)."""

    def prepare(self, payload, correlation_id, start, end):
        return ("req", correlation_id, start, end, payload[4] if payload[0] == "req" else payload[2])


def iterative(max_batch_size: int = 0) -> SequenceScheduler:
    return SequenceScheduler("m", SequenceBatcher(iterative=True), max_batch_size, Requests(), clock=Clock())


def given_back(execution, index: int = 0, final: bool = True) -> None:
    """The instance gives back request `index` of `execution` (the others get a result, or nothing in a stream)."""
    results = [RESCHEDULED if i == index else (FakeResult(p) if final else NO_RESULT)
               for i, p in enumerate(execution.payloads)]
    finals = None if final else [i == index for i in range(len(results))]
    execution.sent += not final
    execution.sink.deliver(results, ExecutionStats(), final, finals)
    execution.finished = final


def test_a_request_given_back_runs_again_in_its_own_sequence_and_the_next_waits_for_its_end():
    async def main():
        scheduler = iterative()
        a = FakeInstance("a")
        scheduler.add_instance(a)
        first, _ = make_job((0, "", 10))
        second, _ = make_job((0, "E", 20))  # (without an id: a sequence of its own, START only, as in Triton)
        scheduler.submit(first)
        scheduler.submit(second)
        assert a.executions[0].payloads == [("req", 1, True, False, 10)]  # the scheduler's ids count from 1
        given_back(a.executions[0])
        assert not first.future.done() and first.state != DONE
        assert a.executions[1].payloads == [("req", 1, False, False, 10)]  # the same request, no flags; 2 waits
        given_back(a.executions[1])
        assert a.executions[2].payloads == [("req", 1, False, False, 10)]
        a.executions[2].reply()
        assert (await first.future).result.value == ("req", 1, False, False, 10)
        assert a.executions[3].payloads == [("req", 2, True, False, 20)]  # its sequence ended: the slot went on
        a.executions[3].reply()
        await second.future
        assert scheduler.active_sequences == 0 and scheduler.queue_size == 0

    asyncio.run(main())


def test_sequences_of_a_batch_go_on_while_one_that_ends_frees_its_slot():
    async def main():
        scheduler = iterative(max_batch_size=2)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        jobs = [make_job((0, "", value))[0] for value in (1, 2, 3)]
        for job in jobs:
            scheduler.submit(job)
        assert a.executions[0].payloads == [("req", 1, True, False, 1)]
        given_back(a.executions[0])
        assert a.executions[1].payloads == [("req", 1, False, False, 1), ("req", 2, True, False, 2)]
        results = [FakeResult(a.executions[1].payloads[0]), RESCHEDULED]  # 1 ends, 2 goes on
        a.executions[1].sink.deliver(results, ExecutionStats(), True)
        assert a.executions[2].payloads == [("req", 3, True, False, 3), ("req", 2, False, False, 2)]
        await jobs[0].future

    asyncio.run(main())


def test_a_stream_given_back_mid_way_is_not_ended_by_its_executions_end():
    async def main():
        scheduler = iterative()
        a = FakeInstance("a")
        scheduler.add_instance(a)
        job, ended = make_job((0, "", 5), stream=True)
        scheduler.submit(job)
        given_back(a.executions[0], final=False)  # (a decoupled model: its item for the request, then the call's end)
        a.executions[0].sink.deliver([None], ExecutionStats(), True)
        assert job.state != DONE and not ended and job.queue.empty()
        assert a.executions[1].payloads == [("req", 1, False, False, 5)]  # (queued again, and started at once)
        a.executions[1].reply()
        assert (await job.next()).final and ended == [1]

    asyncio.run(main())


def test_a_request_given_back_whose_client_left_is_not_run_again_and_its_sequence_ends():
    async def main():
        scheduler = iterative()
        a = FakeInstance("a")
        scheduler.add_instance(a)
        first, ended = make_job((0, "", 1))
        second, _ = make_job((0, "", 2))
        scheduler.submit(first)
        scheduler.submit(second)
        scheduler.withdraw(first)
        given_back(a.executions[0])
        assert ended == [1]
        assert a.executions[1].payloads == [("req", 2, True, False, 2)]

    asyncio.run(main())


def test_without_iterative_sequences_a_request_given_back_fails_in_tritons_words():
    async def main():
        scheduler = ModelScheduler("m")
        a = FakeInstance("a")
        scheduler.add_instance(a)
        job, ended = make_job("x")
        scheduler.submit(job)
        given_back(a.executions[0])
        with pytest.raises(ServerError) as caught:
            await job.future
        assert caught.value.status == Status.INVALID_ARG and str(caught.value) == RESCHEDULE_REFUSED
        assert ended == [1] and len(a.executions) == 1

    asyncio.run(main())


def test_a_request_flagged_end_that_is_given_back_fails_in_tritons_words_and_ends_its_sequence():
    async def main():
        scheduler = iterative()
        a = FakeInstance("a")
        scheduler.add_instance(a)
        job, ended = make_job((5, "SE", 1))
        scheduler.submit(job)
        given_back(a.executions[0])
        with pytest.raises(ServerError) as caught:
            await job.future
        assert caught.value.status == Status.INVALID_ARG and str(caught.value) == RESCHEDULE_REFUSED
        assert ended == [1] and scheduler.active_sequences == 0 and len(a.executions) == 1

    asyncio.run(main())
