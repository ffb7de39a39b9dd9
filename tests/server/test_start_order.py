"""The order in which a server starts the models given at start: models of their own side by side, at most as many
at once as the cores it may use; an ensemble only once every model before it has started; a failure (exit on error)
raised once the models beside it have started."""

from __future__ import annotations

import asyncio
import types

import pytest

from pytriton.config.server import ModelSpec
from pytriton.core.ensemble import TARGET_PREFIX as ENSEMBLE_TARGET
from pytriton.server import composition
from pytriton.server.composition import Server


class Starts:
    """A stand-in for Server._add_model: each start waits for its gate; records what ran at once."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.began: list[tuple[str, frozenset[str]]] = []  # (model, the models starting meanwhile)
        self.gates: dict[str, asyncio.Event] = {}
        self.fail: set[str] = set()
        self.done: list[str] = []

    async def add(self, core: object, host: object, spec: ModelSpec) -> None:
        name = spec.config.model_name
        self.began.append((name, frozenset(self.running)))
        self.running.add(name)
        gate = self.gates.setdefault(name, asyncio.Event())
        await gate.wait()
        self.running.discard(name)
        if name in self.fail:
            raise RuntimeError(f"model '{name}' failed to load")
        self.done.append(name)


def spec(name: str, ensemble: bool = False) -> ModelSpec:
    return ModelSpec(types.SimpleNamespace(model_name=name),  # type: ignore[arg-type]
                     ENSEMBLE_TARGET + "x" if ensemble else "tests.models:add_sub")


async def start(starts: Starts, specs: list[ModelSpec]) -> asyncio.Task[None]:
    server = types.SimpleNamespace(_add_model=starts.add)
    task = asyncio.ensure_future(Server._add_models(server, None, None, specs))  # type: ignore[arg-type]
    for _ in range(10):
        await asyncio.sleep(0)
    return task


async def open_gates(starts: Starts, *names: str) -> None:
    for name in names:
        starts.gates.setdefault(name, asyncio.Event()).set()
    for _ in range(10):
        await asyncio.sleep(0)


def test_models_start_side_by_side_bounded_by_the_cores(monkeypatch):
    monkeypatch.setattr(composition, "usable_cores", lambda: 2)

    async def main() -> None:
        starts = Starts()
        task = await start(starts, [spec("a"), spec("b"), spec("c")])
        assert starts.running == {"a", "b"}  # two at once: the bound
        await open_gates(starts, "a")
        assert starts.running == {"b", "c"}
        await open_gates(starts, "b", "c")
        await task
        assert sorted(starts.done) == ["a", "b", "c"]

    asyncio.run(main())


def test_an_ensemble_starts_after_every_model_before_it(monkeypatch):
    monkeypatch.setattr(composition, "usable_cores", lambda: 4)

    async def main() -> None:
        starts = Starts()
        task = await start(starts, [spec("a"), spec("b"), spec("ens", ensemble=True), spec("c")])
        assert starts.running == {"a", "b"}
        await open_gates(starts, "b")
        assert starts.running == {"a"}  # the ensemble waits for a
        await open_gates(starts, "a")
        assert starts.running == {"ens"}
        await open_gates(starts, "ens", "c")
        await task
        assert dict(starts.began)["ens"] == frozenset()

    asyncio.run(main())


def test_a_failure_is_raised_once_the_models_beside_it_have_started(monkeypatch):
    monkeypatch.setattr(composition, "usable_cores", lambda: 2)

    async def main() -> None:
        starts = Starts()
        starts.fail.add("a")
        task = await start(starts, [spec("a"), spec("b")])
        await open_gates(starts, "a")
        assert not task.done()  # b is still starting
        await open_gates(starts, "b")
        with pytest.raises(RuntimeError, match="model 'a' failed to load"):
            await task
        assert starts.done == ["b"]

    asyncio.run(main())
