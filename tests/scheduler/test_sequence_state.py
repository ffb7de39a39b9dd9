"""Implicit state in the sequence batcher over fake instances: each sequence's state goes from the result of one of
its requests to the next one; it is dropped when the sequence ends (END, idle release, withdrawn END, instance
death) and kept over a failed request."""

from __future__ import annotations

import pytest

from pytriton.exceptions import ServerError
from pytriton.model_config.sequence import SequenceBatcher
from pytriton.scheduler.sequence import SequenceScheduler
from tests.scheduler.fakes import Clock, FakeInstance, FakeRequests, FakeResult, run, submit, turns


class StateRequests(FakeRequests):
    """A prepared payload is ('req', id, start, end, value, state); a result's state is its state plus value."""

    stateful = True

    def client_view(self, payload):
        return "view"

    def prepare_state(self, payload, correlation_id, start, end, state):
        return ("req", correlation_id, start, end, payload[2], state)

    def keep_state(self, view, result, state):
        assert view == "view"
        if not isinstance(result, FakeResult):
            return state
        _, _, _, _, value, given = result.value
        return (given or 0) + value


def scheduler_of(policy=None, max_batch_size=0, clock=None):
    return SequenceScheduler("m", policy or SequenceBatcher(), max_batch_size, StateRequests(),
                             clock=clock or Clock())


def test_state_goes_from_each_result_to_the_sequences_next_request_and_is_dropped_at_end():
    async def main():
        scheduler = scheduler_of(max_batch_size=2)
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        submit(scheduler, 1, "S", 1)
        submit(scheduler, 2, "S", 10)
        submit(scheduler, 1, "", 2)
        submit(scheduler, 2, "E", 20)  # queued behind its START: takes the state of that one's result
        a.executions[0].reply()
        b.executions[0].reply()
        assert a.executions[1].payloads == [("req", 1, False, False, 2, 1)]
        assert b.executions[1].payloads == [("req", 2, False, True, 20, 10)]
        assert 2 not in scheduler._states  # ended: nothing kept
        b.executions[1].reply()
        a.executions[1].reply()
        submit(scheduler, 1, "E", 3)
        assert a.executions[2].payloads == [("req", 1, False, True, 3, 3)]
        a.executions[2].reply()
        assert scheduler._states == {}
        submit(scheduler, 1, "S", 5)  # the same id again: the initial state
        assert a.executions[3].payloads == [("req", 1, True, False, 5, None)]

    run(main())


def test_a_failed_request_keeps_the_state_before_it():
    async def main():
        scheduler = scheduler_of()
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, 1, "S", 1)
        a.executions[0].reply()
        failed = submit(scheduler, 1, "", 2)
        a.executions[1].reply(error_index=0)
        with pytest.raises(ServerError):
            await failed.future
        submit(scheduler, 1, "", 3)
        assert a.executions[2].payloads == [("req", 1, False, False, 3, 1)]

    run(main())


def test_an_idle_release_drops_the_state():
    async def main():
        clock = Clock()
        scheduler = scheduler_of(SequenceBatcher(max_sequence_idle_microseconds=1000), clock=clock)
        a = FakeInstance("a")
        scheduler.add_instance(a)
        submit(scheduler, 1, "S", 1)
        a.executions[0].reply()
        assert scheduler._states == {1: 1}
        clock.ns = 1_000_000
        scheduler.reap()
        assert scheduler._states == {}

    run(main())


def test_a_withdrawn_end_request_and_a_dead_instance_drop_the_state():
    async def main():
        scheduler = scheduler_of()
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        submit(scheduler, 1, "S", 1)
        submit(scheduler, 2, "S", 2)
        end = submit(scheduler, 1, "E", 3)
        scheduler.withdraw(end)
        a.executions[0].reply()
        b.executions[0].reply()
        await turns()
        assert scheduler._states == {2: 2}
        b.die(scheduler)
        assert scheduler._states == {}

    run(main())
