"""Thread CPU of the sequence row's own pieces, per request, against the dynamic batcher's (docs/profile.md, "Sequence
row, third pass"). Runs the pytriton first on sys.path: compare two trees by alternating

    PYTHONPATH=/path/to/tree .venv/bin/python scripts/bench_lib/seq_pieces.py

- parse: a perf_analyzer-like sequence ModelInfer request (id "0", sequence_id / sequence_start / sequence_end in
  no fixed order, a new sequence id per request) through `parse_infer_request` and `to_infer_request`;
- scheduler: the server's sequence batcher with the core's SequenceControls, 4 requests per Direct batch in slots 0, 2,
  3, 5 (6 rows), submitted while the previous batch runs, then answered; beside the dynamic batcher with 3 jobs;
- worker: one Direct batch (4 ready rows, 3 not-ready rows) through SequenceRows.complete, `@batch` with
  sched_models.accumulate and CallableBackend.check_outputs; beside the dynamic row's batch of 3 rows of 1 input.
Best of 7 runs each (time.thread_time_ns).
"""

from __future__ import annotations

import asyncio
import pathlib
import random
import sys
import time

import numpy as np

sys.path.insert(1, str(pathlib.Path(__file__).resolve().parent.parent))

from bench_lib import sched_models  # noqa: E402
from pytriton.backends.callable_backend import CallableBackend  # noqa: E402
from pytriton.backends.sequence_rows import SequenceRows  # noqa: E402
from pytriton.core.sequence_controls import SequenceControls  # noqa: E402
from pytriton.core.types import ExecutionOutput, ExecutionRequest, Tensor  # noqa: E402
from pytriton.frontend.grpc import wire as _wire  # noqa: E402
from pytriton.frontend.grpc._convert import to_infer_request  # noqa: E402
from pytriton.model_config.sequence import ControlKind, SequenceBatcher, SequenceControl  # noqa: E402
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig  # noqa: E402
from pytriton.proxy.messages import FLAG_NOT_READY, FLAG_SEQUENCE_CONTROLS  # noqa: E402
from pytriton.proxy.types import Request  # noqa: E402
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler  # noqa: E402
from pytriton.scheduler.job import ExecutionStats, Job  # noqa: E402
from pytriton.scheduler.sequence import SequenceScheduler  # noqa: E402

POLICY = SequenceBatcher(controls=(SequenceControl(ControlKind.START, "START", "INT32", (0, 1)),
                                   SequenceControl(ControlKind.READY, "READY", "INT32", (0, 1)),
                                   SequenceControl(ControlKind.CORRID, "CORRID", "UINT64")))
SPEC = dict(inputs=[TensorSpec("INPUT", "FP32", (16,))], outputs=[TensorSpec("OUTPUT", "FP32", (16,))],
            max_batch_size=8)


def _best(run, runs: int = 7) -> float:
    return min(run() for _ in range(runs))


def parse() -> float:
    from tritonclient.grpc import service_pb2 as pb

    rng = random.Random(1)

    def request(sequence_id: int, start: bool) -> bytes:
        message = pb.ModelInferRequest(model_name="acc", id="0")
        keys = ["sequence_id", "sequence_start", "sequence_end"]
        rng.shuffle(keys)
        for key in keys:
            if key == "sequence_id":
                message.parameters[key].int64_param = sequence_id
            else:
                message.parameters[key].bool_param = start if key == "sequence_start" else False
        message.inputs.add(name="INPUT", datatype="FP32").shape.extend([1, 16])
        message.raw_input_contents.append(bytes(64))
        return message.SerializeToString()

    messages = [request(rng.randint(1, 10**6), rng.random() < 0.05) for _ in range(3000)]
    for data in messages[:16]:
        to_infer_request(_wire.parse_infer_request(data))

    def run() -> float:
        start = time.thread_time_ns()
        for data in messages:
            to_infer_request(_wire.parse_infer_request(data))
        return (time.thread_time_ns() - start) / len(messages) / 1000

    return _best(run)


class _Instance:
    label = "i"

    def __init__(self):
        self.last = None

    def execute(self, payloads, sink):
        self.last = (payloads, sink)


def _reply(instance: _Instance) -> None:
    payloads, sink = instance.last
    sink.deliver([ExecutionOutput() for _ in payloads], ExecutionStats(0, 1, 2, 3))


TENSOR = Tensor("INPUT", "FP32", (1, 16), bytes(64))


def _payload(correlation_id: int, start: bool = False) -> ExecutionRequest:
    return ExecutionRequest([TENSOR], {}, [], {}, {"sequence_id": correlation_id, "sequence_start": start,
                                                  "sequence_end": False})


async def _sequence_scheduler(n: int) -> float:
    scheduler = SequenceScheduler("acc", POLICY, 8, SequenceControls("acc", POLICY, 8, ["OUTPUT"]))
    instance = _Instance()
    scheduler.add_instance(instance)
    for correlation_id in range(1, 9):
        scheduler.submit(Job(_payload(correlation_id, True)))
        _reply(instance)
    ids = [1, 3, 4, 6]
    start = time.thread_time_ns()
    for _ in range(n):
        for correlation_id in ids:
            scheduler.submit(Job(_payload(correlation_id)))
        _reply(instance)
    return (time.thread_time_ns() - start) / n / len(ids) / 1000


async def _dynamic_scheduler(n: int) -> float:
    scheduler = ModelScheduler("acc", BatchPolicy(8), 1)
    instance = _Instance()
    scheduler.add_instance(instance)
    scheduler.submit(Job(_payload(1)))
    start = time.thread_time_ns()
    for _ in range(n):
        for _ in range(3):
            scheduler.submit(Job(_payload(0)))
        _reply(instance)
    return (time.thread_time_ns() - start) / n / 3 / 1000


def worker() -> tuple[float, float]:
    sequence_config = TritonModelConfig(model_name="acc", sequence_batcher=POLICY, **SPEC)  # type: ignore[arg-type]
    dynamic_config = TritonModelConfig(model_name="acc", **SPEC)  # type: ignore[arg-type]
    buffer = np.zeros((8, 1, 16), np.float32)
    buffer.flags.writeable = False
    rows = SequenceRows(sequence_config)
    sequence_backend = CallableBackend(sched_models.accumulate, sequence_config)
    dynamic_backend = CallableBackend(sched_models.accumulate, dynamic_config)
    layout = [True, False, True, True, False, True, False]  # (ready rows)

    def sequence_batch(k: int) -> list[Request]:
        return [Request({"INPUT": buffer[i]}, {}, None, None, "", 1 + i + k % 3,
                        FLAG_SEQUENCE_CONTROLS | (1 if k % 20 == 0 else 0)) if ready
                else Request({}, {}, None, None, "", 0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)
                for i, ready in enumerate(layout)]

    def run_sequence() -> float:
        batches = [sequence_batch(k) for k in range(2000)]
        start = time.thread_time_ns()
        for requests in batches:
            requests, _ = rows.complete(requests, [""] * len(requests))
            sequence_backend.check_outputs(requests, sequence_backend(requests))
        return (time.thread_time_ns() - start) / len(batches) / 4 / 1000

    def run_dynamic() -> float:
        batches = [[Request({"INPUT": buffer[i]}) for i in range(3)] for _ in range(2000)]
        start = time.thread_time_ns()
        for requests in batches:
            dynamic_backend.check_outputs(requests, dynamic_backend(requests))
        return (time.thread_time_ns() - start) / len(batches) / 3 / 1000

    return _best(run_sequence), _best(run_dynamic)


def main() -> None:
    import pytriton

    print(f"pytriton from {pathlib.Path(pytriton.__file__).parent.parent}")
    print(f"  parse + convert, sequence request      {parse():6.2f} us")
    sequence = _best(lambda: asyncio.run(_sequence_scheduler(3000)))
    dynamic = _best(lambda: asyncio.run(_dynamic_scheduler(3000)))
    print(f"  scheduler per request                  {sequence:6.2f} us   (dynamic batcher {dynamic:.2f} us)")
    sequence, dynamic = worker()
    print(f"  worker per ready request (4 + 3 rows)  {sequence:6.2f} us   (dynamic batch of 3: {dynamic:.2f} us)")


if __name__ == "__main__":
    main()
