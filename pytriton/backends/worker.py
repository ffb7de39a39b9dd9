"""Entry point of a worker process: `python -m pytriton.backends.worker '<WorkerSpec as JSON>'`.

Connects to the server, imports the callable, then serves INFER messages one batch at a time until the
server says STOP, the server process disappears, or SIGTERM arrives.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import inspect
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pytriton.backends import pb_metrics, pb_utils
from pytriton.backends._error_log import CallableErrorLog
from pytriton.backends.bls import BlsClient
from pytriton.backends.callable_backend import (
    CallableBackend,
    InferenceCallableError,
    StreamStep,
    inject_triton_context,
    load_callable,
)
from pytriton.backends.model_log import ModelLogGate
from pytriton.backends.python_model import PythonModelBackend, instance_name, is_python_model_target
from pytriton.backends.sequence_rows import SequenceRows, sequence_rows
from pytriton.backends.spec import WorkerSpec
from pytriton.backends.target import user_traceback
from pytriton.backends.warmup import WarmupError, run_warmup
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import pid_alive
from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.messages import ServerToWorker

logger = logging.getLogger("pytriton.backends")

PARENT_CHECK_MS = 1000
# Tests only: a folder where a worker about to write a call's outputs into client regions, past its last look for a
# CANCEL, stops when it finds a file `hold` there: it renames it `held-<pid>-<call id>` and waits (60 s at most) until a
# file `release` appears. The window between that look and the write, made deterministic (tests/e2e/test_shm_race.py).
OUTPUT_GATE_ENV = "PYTRITON_TEST_OUTPUT_WRITE_GATE"


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the server process goes (Linux only; a poll covers the rest)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Terminated(SystemExit):
    """SIGTERM: the worker is stopped from outside (its server died, or an operator); the call in flight is answered
    and the process exits without a FATAL (nobody asked for one)."""

    def __str__(self) -> str:
        return f"the worker process was terminated (exit code {self.code})"


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated(128 + signum)


def instance_device(config: TritonModelConfig, instance: int = 0) -> str:
    """The device a class target's __init__ gets: a GPU instance sees only its own GPU (the supervisor sets
    CUDA_VISIBLE_DEVICES to it), so it is always local device 0."""
    return "cuda:0" if config.instance_places()[instance].device is not None else "cpu"


def _format_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def serve(spec: WorkerSpec, infer_func: Any = None, stop: threading.Event | None = None) -> int:
    """Run the worker loop described by `spec`; return the exit code.

    A spawned worker imports `spec.callable`; a thread in the user's process (Triton.bind) passes the callable
    itself and a `stop` event. The loop ends on STOP from the server, when the server is gone (it was our parent,
    or its pid no longer exists), or when `stop` is set. If it ends for any other reason (the callable raised
    SystemExit or KeyboardInterrupt, which end it once the call is answered; a failure of the loop itself), the
    server is told (FATAL), so that the instance leaves its model at once, and the exception goes on.
    """
    config = spec.config
    label = spec.label
    server_pid = spec.server_pid
    watch = spec.watch
    endpoint = WorkerEndpoint(
        spec.address,
        spec.identity.encode(),
        spec.tag,
        server_pid,
        inline_max=spec.inline_max,
        arena_kind=spec.arena_kind,
    )
    poll_ms = PARENT_CHECK_MS if stop is None else 100

    server_fd = _open_pidfd(server_pid) if watch == "pidfd" else None

    def server_gone() -> bool:
        if server_fd is not None:  # (a worker forked from the template: the pidfd is readable once the server ended)
            return server_fd < 0 or bool(select.select([server_fd], [], [], 0)[0])
        return (watch == "parent" and os.getppid() != server_pid) or (watch == "pid" and not pid_alive(server_pid))

    def alive() -> bool:
        """Whether to go on waiting (for credit): False once told to stop or the server is gone."""
        return not ((stop is not None and stop.is_set()) or server_gone())

    hello = False
    warmup: list[tuple[int, int]] = []  # the warm-up's executions, for the model's statistics (as Triton counts them)
    backend: CallableBackend | None = None
    what = f"inference callable '{spec.callable}'"
    try:
        try:
            if infer_func is None and is_python_model_target(spec.callable):
                what = f"model '{config.model_name}' version {config.model_version}"
                if spec.model_log:
                    pb_utils._log_gate = ModelLogGate(spec.model_log)
                pb_utils._bls_client = BlsClient(  # (initialize() may use BLS)
                    endpoint, config, alive, poll_ms, instance_name(config, spec.instance))
                pb_metrics._client = pb_metrics.MetricsClient(  # (usable in initialize)
                    endpoint, alive, poll_ms, instance_name(config, spec.instance))
                endpoint.before_result = pb_metrics.flush
                backend = PythonModelBackend(str(spec.callable), config, spec.instance)
                if config.warmup:  # (before the hello: the instance, and so the model, is not ready until it ran)
                    try:
                        warmup = run_warmup(backend, instance_name(config, spec.instance))
                    except WarmupError as exc:
                        logger.error("%s: %s", label, exc)
                        endpoint.send_fatal(str(exc))
                        return 3
            else:
                if infer_func is not None:
                    fn = infer_func
                elif spec.callable is not None:
                    fn = load_callable(spec.callable, device=instance_device(config, spec.instance))
                else:
                    raise ValueError("the worker spec names no inference callable")
                inject_triton_context(fn, config)
                backend = CallableBackend(fn, config)
        except BaseException as exc:  # noqa: BLE001 - reported to the server, which explains it to the user
            where = user_traceback(exc).rstrip("\n")  # the user's file and line: import errors, a class's __init__
            if is_python_model_target(spec.callable) and where:  # initialize()'s traceback: the server shows it
                logger.debug("%s: cannot load %s: %s", label, what, _format_error(exc))
                endpoint.send_fatal(f"cannot load {what}: {_format_error(exc)}\n{where}")
                return 3
            logger.error("%s: cannot load %s: %s%s", label, what, _format_error(exc), "\n" + where if where else "")
            endpoint.send_fatal(f"cannot load {what}: {_format_error(exc)}")
            return 3
        rows = sequence_rows(config)  # (a sequence batcher's controls are added here)
        if stop is None:  # a worker process of our own (not a thread in the user's process)
            gc.collect()
            gc.freeze()  # the callable's module and model are long-lived: keep them out of every collection
        errors = CallableErrorLog(label, logger)
        gate = os.environ.get(OUTPUT_GATE_ENV) or None
        endpoint.send_hello(warmup)
        hello = True
        logger.debug("%s ready (pid %d)", label, os.getpid())
        idle_polls = 0
        while True:
            received = endpoint.receive(poll_ms)
            if received is None:
                pb_metrics.flush()  # updates made by the model's other threads meanwhile
                if stop is not None and stop.is_set():
                    return 0
                idle_polls += 1
                if idle_polls * poll_ms < PARENT_CHECK_MS:
                    continue
                idle_polls = 0
                if server_gone():
                    logger.warning("%s: server process is gone; exiting", label)
                    return 0
                continue
            message, frames = received
            if message.kind == ServerToWorker.STOP:
                return 0
            if message.kind != ServerToWorker.INFER:
                continue
            if not endpoint.starting(message.id):  # its client went away while it waited behind another call
                endpoint.send_result(message.id, None, error="the request was cancelled before it started")
                continue
            _execute(endpoint, backend, message, frames, errors, alive, poll_ms, rows, gate)
    except BaseException as exc:
        if hello and not isinstance(exc, _Terminated):
            _report_end(endpoint, label, exc)
        raise
    finally:
        pb_utils._bls_client = None
        pb_utils._finalizing = True
        try:
            if isinstance(backend, PythonModelBackend):
                backend.close()  # the model's finalize()
        finally:
            pb_utils._finalizing = False
            pb_metrics.flush()  # (what finalize() updated, and the releases of what it dropped)
            pb_metrics._client = None
            endpoint.close()
            if server_fd is not None and server_fd >= 0:
                os.close(server_fd)


def _open_pidfd(pid: int) -> int:
    """A pidfd of process `pid`, or -1 when it is gone already."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1


def _report_end(endpoint: WorkerEndpoint, label: str, exc: BaseException) -> None:
    """The loop ends without being told to: the server hears why (best effort: the socket may be what failed)."""
    error = _format_error(exc)
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        logger.error("%s stopped serving: %s", label, error)
    else:
        logger.exception("%s stopped serving: %s", label, error)
    try:
        endpoint.send_fatal(error)
    except Exception:  # noqa: BLE001 - the loop is ending either way
        logger.debug("%s: could not tell the server", label, exc_info=True)


def _with_failed(failed: list[str], responses: Sequence[Any], finals: list[bool] | None = None, later: bool = False
                 ) -> tuple[list[Any], list[bool] | None]:  # fmt: skip
    """The responses (and per-request finals) of the requests that ran, with those that could not run in their
    places: their errors, which are final; in a stream's later messages nothing (None) for them."""
    if not any(failed):
        return list(responses), finals
    ran = iter(responses)
    ran_finals = iter(finals if finals is not None else [False] * len(responses))
    merged: list[Any] = []
    merged_finals: list[bool] = []
    for error in failed:
        if error:
            merged.append(None if later else ([], error, {}))
            merged_finals.append(not later)
        else:
            merged.append(next(ran))
            merged_finals.append(next(ran_finals))
    return merged, merged_finals


def _execute(
    endpoint: WorkerEndpoint,
    backend: CallableBackend,
    message: Any,
    frames: Any,
    errors: CallableErrorLog,
    alive: Callable[[], bool],
    poll_ms: int,
    rows: SequenceRows | None = None,
    gate: str | None = None,
) -> None:
    """Run one INFER message: decode, call the callable, check and send what it returns (or its error).

    A stream waits for credit between two responses (the generator stays suspended) while its consumers are a whole
    window behind. Any exception of the callable answers the call; SystemExit and KeyboardInterrupt then go on."""
    start = time.perf_counter_ns()
    try:
        requests, regions, failed = endpoint.decode(message, frames)
        if rows is not None:  # the rows of a sequence batch get their control inputs
            requests, failed = rows.complete(requests, failed)
    except Exception as exc:  # noqa: BLE001
        logger.exception("%s: cannot decode request", errors.label)
        endpoint.send_result(message.id, None, error=f"worker could not read the request: {_format_error(exc)}")
        return
    if not requests:  # each one's client region could not be used
        endpoint.send_result(message.id, _with_failed(failed, [])[0])
        return
    decoupled = backend.config.decoupled
    dropped = rows.not_ready(message) if rows is not None and not decoupled else []  # answers nobody waits for
    ran_count = len(requests)
    if decoupled:
        endpoint.begin_stream(message)
    t_input = time.perf_counter_ns()
    sent = 0
    bls = None
    if isinstance(backend, PythonModelBackend):
        call_id = message.id
        if any(failed):  # (requests whose regions failed never run: request i of the model is another of the call)
            ran = [index for index, error in enumerate(failed) if not error]
            backend.cancel_probe = lambda i: endpoint.request_cancelled(call_id, ran[i])
        else:
            backend.cancel_probe = functools.partial(endpoint.request_cancelled, call_id)
        bls = pb_utils._bls_client
        if bls is not None:
            bls.serving = message  # (its BLS requests extend the call chains of these requests)
    try:
        result = backend(requests)
        if not decoupled and (inspect.isgenerator(result) or inspect.isasyncgen(result)):
            raise InferenceCallableError(
                f"inference callable of model '{backend.config.model_name}' returned a generator, but the model is "
                "not decoupled; bind it with ModelConfig(decoupled=True) to stream responses"
            )
        stream = backend.iterate(result)
        for raw in stream:
            t_infer = time.perf_counter_ns()
            if regions is not None:
                if endpoint.cancelled(message.id):
                    # The server gave up on this call (its clients left, or it outlived the execution timeout): nothing
                    # is written into its client regions. A CANCEL that comes after this look is too late to stop the
                    # write; the server then holds the regions' bytes until this call's answer (core/output_holds.py).
                    stream.close()
                    endpoint.send_result(message.id, None, error="the request was cancelled")
                    return
                if gate is not None:
                    _wait_at_gate(gate, message.id)
            responses, finals = _with_failed(failed, backend.check_outputs(requests, raw),
                                             raw.finals if isinstance(raw, StreamStep) else None, later=sent > 0)
            for index in dropped:
                responses[index] = None  # (sent as absent: nothing to encode, read back and release)
            nbytes = endpoint.send_result(
                message.id,
                responses,
                regions,
                timings=(t_input - start, t_infer - t_input),
                output_started_ns=t_infer,
                final=not decoupled,
                started_ns=start,
                finals=finals,
            )
            sent += 1
            if decoupled:
                credit = endpoint.credit
                ahead = credit is not None and not credit.on_sent(nbytes)  # a window ahead of its consumers
                if endpoint.cancelled(message.id) or (ahead and not endpoint.await_credit(alive, poll_ms)):
                    logger.debug("%s: stream %d cancelled by the server", errors.label, message.id)
                    stream.close()  # runs the callable's generator cleanup (GeneratorExit)
                    break
            start = t_input = time.perf_counter_ns()
    except InferenceCallableError as exc:  # what it returned does not fit the model
        errors.report(exc, traceback=False)
        endpoint.send_result(message.id, None, error=str(exc))
        return
    except BaseException as exc:  # the callable's error is logged, and goes back to the client
        if not isinstance(exc, _Terminated):
            errors.report(exc)
        endpoint.send_result(message.id, None, error=_format_error(exc))
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise  # the call is answered; the loop ends as the callable asked (serve tells the server)
        return
    finally:
        del requests
        endpoint.credit = None
        if bls is not None:
            bls.serving = None
    if decoupled:  # the stream is complete (requests that could not run hear why, if no message told them yet)
        unanswered = not sent and any(failed)
        endpoint.send_result(message.id, _with_failed(failed, [None] * ran_count)[0] if unanswered else None,
                             final=True)
    elif sent != 1:
        error = InferenceCallableError(f"inference callable of model '{backend.config.model_name}' returned no response")
        errors.report(error, traceback=False)
        endpoint.send_result(message.id, None, error=str(error))


def _wait_at_gate(gate: str, call_id: int) -> None:
    """See OUTPUT_GATE_ENV (tests only)."""
    try:
        os.rename(os.path.join(gate, "hold"), os.path.join(gate, f"held-{os.getpid()}-{call_id}"))
    except OSError:
        return  # no `hold` to take: this call goes on
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(gate, "release")) and time.monotonic() < deadline:
        time.sleep(0.005)


def _process_setup(spec: WorkerSpec) -> None:
    """What a worker process sets up before it serves, however it was started: its log lines, its signals."""
    logging.basicConfig(
        level=spec.log_level,
        format=f"%(asctime)s %(levelname)s worker[{os.getpid()}] %(name)s: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group; the server drains and stops us
    signal.signal(signal.SIGTERM, _terminate)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = WorkerSpec.from_json(sys.stdin.read() if args[0] == "-" else args[0])  # "-": a large one, on stdin
    _process_setup(spec)
    die_with_parent()
    if os.getppid() != spec.server_pid:
        return 0
    if argv is None and is_python_model_target(spec.callable):
        sys.argv = [""]  # what a model sees on Triton's stub (e.g. unittest.main() parses it)
    return serve(spec)


def run_forked(text: str) -> int:
    """A worker forked from the template (pytriton/backends/template.py), its environment and working directory
    already set: the same as `main`, except that its parent is the template, so it watches the server by pidfd."""
    spec = WorkerSpec.from_json(text)
    _process_setup(spec)
    sys.argv = [""] if is_python_model_target(spec.callable) else [__file__, "-"]
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main())
