"""Text generators the OpenAI port's tests serve with `pytriton serve tests.openai_models:<name>`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from pytriton.decorators import text_generator

GATE_WAIT_S = 60.0  # the most a gated generator waits for its gate (the test opens it, or fails anyway)


def _write(path: str, text: str) -> None:
    """Written whole, then renamed: a reader never sees it half-made."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.005)


@text_generator(prompt_tokens=lambda prompt: len(prompt.split()))
def pieces(prompt: str, parameters: dict[str, Any]) -> Iterator[str]:
    """`p0 `, `p1 `, ... (`pieces` of them, default 5, endless when -1). `fail_at`: raises at that piece.
    `gate_after` and `gate`: after that many pieces, waits until the file `gate` exists. `marker`: the file written
    with the count of pieces made (the one at whose `yield` it was closed included) when the generator is closed
    early (its client left)."""
    count = int(parameters.get("pieces", 5))
    made = 0
    finished = False
    try:
        step = 0
        while count < 0 or step < count:
            if step == parameters.get("fail_at"):
                raise RuntimeError(f"pieces failed at piece {step}")
            if step == parameters.get("gate_after") and parameters.get("gate"):
                _wait_for(parameters["gate"])
            made += 1
            yield f"p{step} "
            step += 1
        finished = True
    finally:
        if not finished and parameters.get("marker"):
            _write(parameters["marker"], str(made))


@text_generator(name="async_pieces")
async def async_pieces(prompt: str, parameters: dict[str, Any]) -> AsyncIterator[str]:
    """An async generator: the prompt's words back, one by one."""
    for word in prompt.split():
        await asyncio.sleep(0)
        yield word + " "
