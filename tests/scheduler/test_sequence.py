"""The sequence batcher over fake instances: slots, backlog, Direct and Oldest batches, idle release, deaths."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.model_config.sequence import SequenceBatcher, SequenceStrategy
from pytriton.scheduler.sequence import SequenceScheduler
from tests.scheduler.fakes import Clock, FakeInstance, FakeRequests, make_job, run, submit, turns


def scheduler_of(policy: SequenceBatcher, max_batch_size: int = 0, clock=None) -> SequenceScheduler:
    return SequenceScheduler("m", policy, max_batch_size, FakeRequests(), clock=clock or Clock())


def test_refusals_use_tritons_words():
    async def main():
        scheduler = scheduler_of(SequenceBatcher())
        scheduler.add_instance(FakeInstance("a"))
        with pytest.raises(ServerError, match="must specify a non-zero or non-empty correlation ID") as info:
            submit(scheduler, 0, "S")
        assert info.value.status == Status.INVALID_ARG
        with pytest.raises(ServerError, match="inference request for sequence 7 to model 'm' must specify the START "
                                              "flag on the first request of the sequence"):
            submit(scheduler, 7)
        job, _ = make_job((5, "S", 0), batch_size=2)
        with pytest.raises(ServerError, match="must specify batch-size 1 due to requirements of sequence batcher"):
            scheduler.submit(job)

    run(main())


def test_direct_fills_lower_slots_first_and_sends_not_ready_requests_for_empty_slots_below_a_busy_one():
    async def main():
        scheduler = scheduler_of(SequenceBatcher(), max_batch_size=2)
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        submit(scheduler, 1, "S", 10)  # slot 0 of a (runs at once)
        submit(scheduler, 2, "S", 20)  # slot 0 of b
        submit(scheduler, 3, "S", 30)  # slot 1 of a, waits for a
        assert a.executions[0].payloads == [("req", 1, True, False, 10)]
        assert b.executions[0].payloads == [("req", 2, True, False, 20)]
        a.executions[0].reply()
        assert a.executions[1].payloads == [("null",), ("req", 3, True, False, 30)]
        submit(scheduler, 1, "", 11)
        submit(scheduler, 3, "E", 31)
        a.executions[1].reply()
        assert a.executions[2].payloads == [("req", 1, False, False, 11), ("req", 3, False, True, 31)]
        submit(scheduler, 4, "S", 40)  # slot 1 of a is free again (3 ended); b's slot 1 comes first by number: a tie
        assert scheduler.active_sequences == 3

    run(main())


def test_a_sequence_waits_in_the_backlog_until_a_slot_is_free():
    async def main():
        scheduler = scheduler_of(SequenceBatcher())
        a = FakeInstance("a")
        scheduler.add_instance(a)
        first = submit(scheduler, 1, "S", 1)
        waiting = [submit(scheduler, 2, "S", 2), submit(scheduler, 2, "E", 3)]
        assert scheduler.queue_size == 2
        a.executions[0].reply()
        await first.future
        assert len(a.executions) == 1  # sequence 1 still holds the only slot
        submit(scheduler, 1, "E", 4)
        a.executions[1].reply()
        assert a.executions[2].payloads == [("req", 2, True, False, 2)]
        a.executions[2].reply()
        assert a.executions[3].payloads == [("req", 2, False, True, 3)]
        a.executions[3].reply()
        for job in waiting:
            await job.future
        assert scheduler.active_sequences == 0 and scheduler.queue_size == 0

    run(main())


def test_a_reaper_that_fires_late_lets_waiting_requests_in_first():
    """The reaper's timer firing long after its time means the event loop was held up (an overloaded machine): the
    next request of a sequence may be waiting unread; the reaper waits one short turn, so that request (arriving in
    that turn) keeps its sequence; without the stall the sequence is released on time."""
    async def main():
        clock = Clock()
        scheduler = scheduler_of(SequenceBatcher(max_sequence_idle_microseconds=1000), clock=clock)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, 1, "S")
        a.executions[0].reply()
        clock.ns = 500_000_000  # the loop was held up for half a second past the 1 ms idle time
        await asyncio.sleep(0.005)  # the reaper's timer fires (late): it puts the decision off once
        assert scheduler.active_sequences == 1
        submit(scheduler, 1, "", 7)  # the request that was waiting in its socket
        await asyncio.sleep(0.05)  # the grace turn's reap: sequence 1 is not idle
        assert a.executions[1].payloads == [("req", 1, False, False, 7)]
        a.executions[1].reply()
        clock.ns += 2_000_000  # now idle, and the timer is on time: released
        scheduler.reap()
        assert scheduler.active_sequences == 0
        with pytest.raises(ServerError, match="must specify the START flag"):
            submit(scheduler, 1)

    run(main())


def test_an_idle_sequence_is_released_and_its_next_request_refused():
    async def main():
        clock = Clock()
        scheduler = scheduler_of(SequenceBatcher(max_sequence_idle_microseconds=1000), clock=clock)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, 1, "S")
        submit(scheduler, 2, "S")  # backlog
        a.executions[0].reply()
        clock.ns = 999_000
        scheduler.reap()
        assert len(a.executions) == 1
        clock.ns = 1_000_000
        scheduler.reap()  # sequence 1 is released; sequence 2 takes its slot
        assert a.executions[1].payloads == [("req", 2, True, False, 0)]
        with pytest.raises(ServerError, match="sequence 1 to model 'm' must specify the START flag"):
            submit(scheduler, 1)

    run(main())


def test_oldest_batches_the_oldest_requests_of_candidate_sequences_one_in_flight_each():
    async def main():
        policy = SequenceBatcher(SequenceStrategy.OLDEST, max_candidate_sequences=3)
        scheduler = scheduler_of(policy, max_batch_size=2)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, "x", "S", 1)  # runs at once
        submit(scheduler, "x", "", 2)
        submit(scheduler, "y", "S", 3)
        submit(scheduler, "z", "S", 4)
        a.executions[0].reply()
        # the oldest waiting: x's second and y's first (z waits, as max_batch_size is 2)
        assert a.executions[1].payloads == [("req", "x", False, False, 2), ("req", "y", True, False, 3)]
        a.executions[1].reply()
        assert a.executions[2].payloads == [("req", "z", True, False, 4)]

    run(main())


def test_a_dead_instance_ends_its_sequences_with_a_clear_error():
    async def main():
        scheduler = scheduler_of(SequenceBatcher())
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        running = submit(scheduler, 1, "S")
        queued = submit(scheduler, 1, "")
        other = submit(scheduler, 2, "S")
        a.die(scheduler)
        for job in (running, queued):
            with pytest.raises(ServerError) as info:
                await job.future
            assert info.value.status == Status.UNAVAILABLE
        assert "went away" in str(queued.future.exception()) or "died" in str(queued.future.exception())
        lost = "sequence 1 of model 'm' ended: its model instance 'a' went away"
        with pytest.raises(ServerError, match=lost) as info:
            submit(scheduler, 1, "E")
        assert info.value.status == Status.UNAVAILABLE
        with pytest.raises(ServerError, match="must specify the START flag"):  # (told once)
            submit(scheduler, 1, "E")
        b.executions[0].reply()
        await other.future
        submit(scheduler, 3, "S")  # a new sequence waits for the slot left
        assert len(b.executions) == 1
        submit(scheduler, 2, "E")
        b.executions[1].reply()
        assert b.executions[2].payloads == [("req", 3, True, False, 0)]

    run(main())


def test_a_withdrawn_end_request_still_ends_its_sequence():
    async def main():
        scheduler = scheduler_of(SequenceBatcher())
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, 1, "S")
        end = submit(scheduler, 1, "E")
        later = submit(scheduler, 2, "S")
        scheduler.withdraw(end)
        a.executions[0].reply()
        await turns()
        assert a.executions[1].payloads == [("req", 2, True, False, 0)]
        a.executions[1].reply()
        await later.future

    run(main())


def test_a_cancelled_queued_request_cancels_its_sequence_as_triton_does():
    # Triton's qa/L0_request_cancellation scheduler_test: cancelling any queued request of a sequence cancels the
    # sequence's other queued requests (CANCELLED) and ends it; what runs finishes; the slot then serves the next.
    async def main():
        scheduler = scheduler_of(SequenceBatcher())
        a = FakeInstance("a")
        scheduler.add_instance(a)
        running = submit(scheduler, 1, "S", 1)
        queued = [submit(scheduler, 1, "", 2), submit(scheduler, 1, "", 3)]
        backlogged = [submit(scheduler, 2, "S", 4), submit(scheduler, 2, "", 5)]
        scheduler.withdraw(queued[0])
        with pytest.raises(ServerError) as caught:
            await queued[1].future
        assert caught.value.status is Status.CANCELLED and caught.value.failure_reason == "CANCELED"
        scheduler.withdraw(backlogged[1])  # a backlogged sequence leaves the backlog
        with pytest.raises(ServerError, match="was cancelled"):
            await backlogged[0].future
        a.executions[0].reply()
        await running.future
        assert len(a.executions) == 1 and scheduler.active_sequences == 0
        with pytest.raises(ServerError, match="must specify the START flag"):
            submit(scheduler, 1, "", 6)  # (the sequence is gone)
        after = submit(scheduler, 3, "S", 7)  # the slot is free again
        assert a.executions[1].payloads == [("req", 3, True, False, 7)]
        a.executions[1].reply()
        await after.future

    run(main())


def test_not_ready_rows_are_unwanted_jobs_whose_results_are_released_once():
    """A Direct batch's not-ready rows: one not-ready payload per batch, nobody awaits them, their results are released
    on arrival (once) and their slots are free for the next batch."""
    from tests.scheduler.fakes import FakeResult

    async def main():
        scheduler = scheduler_of(SequenceBatcher(), max_batch_size=4)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        first = submit(scheduler, 1, "S", 10)  # slot 0 (runs at once)
        jobs = [submit(scheduler, cid, "S", cid) for cid in (2, 3, 4)]  # slots 1, 2, 3 wait
        a.executions[0].reply()
        assert first.future.done()
        a.executions[1].reply()
        assert all(job.future.done() for job in jobs)
        later = submit(scheduler, 4, "", 40)  # slot 3 only: slots 0-2 are not-ready rows
        assert a.executions[2].payloads == [("null",), ("null",), ("null",), ("req", 4, False, False, 40)]
        execution = a.executions[2]
        running = list(execution.sink.jobs)
        assert all(job.abandoned and job.future is None for job in running[:3]) and not running[3].abandoned
        results = execution.reply()
        assert [r.releases for r in results[:3]] == [1, 1, 1] and results[3].releases == 0
        assert (await later.future).result is results[3]
        assert FakeResult.released_twice == []
        submit(scheduler, 2, "", 20)  # (the slots are free for the next batch)
        assert a.executions[3].payloads == [("null",), ("req", 2, False, False, 20)]

    run(main())
