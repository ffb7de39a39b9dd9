"""NameLocks: one model's loads one at a time, other names meanwhile, and nothing kept for a name once its loads end."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.repository.locks import NameLocks


def test_a_name_is_held_by_one_at_a_time_and_others_go_on():
    async def main() -> None:
        locks = NameLocks()
        order: list[str] = []
        first_in = asyncio.Event()
        release_first = asyncio.Event()

        async def first() -> None:
            async with locks("a"):
                order.append("a1 in")
                first_in.set()
                await release_first.wait()
                order.append("a1 out")

        async def second() -> None:
            async with locks("a"):
                order.append("a2 in")

        one = asyncio.ensure_future(first())
        await first_in.wait()
        two = asyncio.ensure_future(second())
        async with locks("b"):  # another name: not held up
            order.append("b")
        await asyncio.sleep(0)
        assert order == ["a1 in", "b"] and len(locks) == 1  # "a": held and waited for
        release_first.set()
        await asyncio.gather(one, two)
        assert order == ["a1 in", "b", "a1 out", "a2 in"]
        assert len(locks) == 0

    asyncio.run(main())


def test_names_leave_no_lock_behind_even_after_an_error_or_a_timeout():
    async def main() -> None:
        locks = NameLocks()
        for i in range(1000):  # a client loading made-up names
            async with locks(f"made-up-{i}"):
                pass
        with pytest.raises(RuntimeError):
            async with locks("x"):
                raise RuntimeError("load failed")
        async with locks("held"):
            with pytest.raises(asyncio.TimeoutError):
                async with locks.hold("held", 0.01):
                    pass
            assert len(locks) == 1
        assert len(locks) == 0
        assert await locks.idle(1.0)

    asyncio.run(main())
