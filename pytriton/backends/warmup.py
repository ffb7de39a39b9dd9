"""Runs a model's warm-up (config.pbtxt `model_warmup`) in its worker, after `initialize()` and before the worker
tells the server it is up, as each Triton model instance runs it before the model is ready: each sample's requests
are executed `count` times (at least once) and their responses dropped. A request the model fails fails the load,
with Triton's words."""

from __future__ import annotations

import time

import numpy as np

from pytriton.backends.callable_backend import CallableBackend, InferenceCallableError
from pytriton.proxy.types import Request


class WarmupError(Exception):
    """A warm-up sample failed: the model instance cannot serve (Triton: the load fails)."""


def run_warmup(backend: CallableBackend, instance: str) -> list[tuple[int, int]]:
    """Run the warm-up of `backend`'s model on instance `instance`; per execution, its request count and duration (ns).

    Every request of a sample gets the sample's tensors ([1, *dims] for a batching model) and asks for every output."""
    config = backend.config
    executions: list[tuple[int, int]] = []
    rng = np.random.default_rng()
    outputs = [spec.name for spec in config.outputs]
    for sample in config.warmup:
        if sample.batch_size == 0:  # (Triton 2.51 runs no request of it)
            continue
        inputs = {warm.name: warm.array(config.batching, rng) for warm in sample.inputs}
        for _ in range(sample.executions):
            if config.batching and sample.batch_size > config.max_batch_size:  # (Triton's check and wording)
                errors = [f"batch size {sample.batch_size} for '{instance}', max allowed is {config.max_batch_size}"
                          ] * sample.batch_size
            else:
                start = time.perf_counter_ns()
                errors = _execute(backend, instance, [Request(dict(inputs), requested_output_names=list(outputs))
                                                      for _ in range(sample.batch_size)])
                executions.append((sample.batch_size, time.perf_counter_ns() - start))
            if errors:
                raise WarmupError(f"failed to run warmup sample '{sample.name}': " + "".join(f"{e}; " for e in errors))
    return executions


def _execute(backend: CallableBackend, instance: str, requests: list[Request]) -> list[str]:
    """One execution of `requests`; the errors of the requests that failed (an exception fails them all)."""
    errors: list[str] = []
    try:
        for raw in backend.iterate(backend(requests)):
            for checked in backend.check_outputs(requests, raw):
                if checked is not None and checked[1]:
                    errors.append(str(checked[1]))
    except InferenceCallableError as exc:  # what the model returned does not fit its configuration
        return [str(exc)] * len(requests)
    except Exception as exc:  # noqa: BLE001 - the model's error fails the warm-up, as in Triton
        return [f"Failed to process the request(s) for model '{instance}', message: {type(exc).__name__}: {exc}"
                ] * len(requests)
    return errors


__all__ = ["WarmupError", "run_warmup"]
