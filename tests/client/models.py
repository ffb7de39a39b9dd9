"""Inference callables served by the client tests (`pytriton serve tests.client.models:<name>`)."""

from __future__ import annotations

import numpy as np


def batched_countdown(requests):
    """Decoupled, batching: COUNT [B, 1] -> N = max COUNT responses, each VALUE [B, 1] = COUNT - 1 - step."""
    count = max(int(r["COUNT"].max()) for r in requests)
    for step in range(count):
        yield [{"VALUE": (r["COUNT"] - 1 - step).astype(np.int32)} for r in requests]


def countdown_then_fail(requests):
    """Decoupled: one response VALUE = [7], then the callable raises."""
    yield [{"VALUE": np.array([7], dtype=np.int32)} for _ in requests]
    raise RuntimeError("the generator failed on purpose")


def stream_parameters(requests):
    """Decoupled: two responses, each the request parameters as 'k=v;...' (BYTES [1])."""
    for _ in range(2):
        out = []
        for r in requests:
            text = ";".join(f"{k}={v}" for k, v in sorted(r.parameters.items()))
            out.append({"PARAMS": np.array([text.encode()], dtype=object)})
        yield out
