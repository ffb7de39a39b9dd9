"""Every environment variable pytriton reads, documented, and the functions that read them (nowhere else does).

Server settings are read once, when a server configuration is built (`ServerConfig.from_env`: by `pytriton serve`,
or by `Triton` in the user's process, whose server inherits the same environment); the values are then passed down
explicitly. An invalid value is a ValueError that names the variable.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

GRPC_IMPLEMENTATIONS = ("h2", "grpcio")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")  # auto: uvloop where it is installed, asyncio's own loop otherwise
# glibc malloc tunables for processes that move large tensors: reuse heap memory instead of fresh mmaps (2.5-3x on
# 1 MiB paths, see the measurements). Applied to the server and its workers unless the user set GLIBC_TUNABLES.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"
TRITON_CONFIG_PREFIX = "PYTRITON_TRITON_CONFIG_"
DEFAULT_MODEL_STALL_S = 60.0
DEFAULT_PIPELINE_DEPTH = 2  # batches a model instance may have in flight (PYTRITON_PIPELINE_DEPTH)
DEFAULT_INLINE_MAX = 64 * 1024  # tensors up to this size travel inside the message to a worker (PYTRITON_INLINE_MAX_BYTES)


def _flag(text: str) -> bool:
    return text.strip() == "1"


def _size(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("negative")
    return value


def _depth(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("below 1")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError("not a number of seconds >= 0")
    return value


def _grpc_implementation(text: str) -> str:
    value = text.strip().lower() or GRPC_IMPLEMENTATIONS[0]
    if value not in GRPC_IMPLEMENTATIONS:
        raise ValueError("unknown")
    return value


def _event_loop(text: str) -> str:
    value = text.strip().lower() or EVENT_LOOPS[0]
    if value not in EVENT_LOOPS:
        raise ValueError("unknown")
    return value


@dataclasses.dataclass(frozen=True)
class ServerVariable:
    """An environment variable that sets a ServerConfig field."""

    name: str
    field: str
    parse: Callable[[str], Any]
    expected: str
    doc: str


SERVER_VARIABLES = (
    ServerVariable("PYTRITON_EXIT_WITH_PARENT", "exit_with_parent", _flag, "1 or 0",
                   "1: the server stops when the process that started it is gone (Triton always sets it)."),
    ServerVariable("PYTRITON_INLINE_MAX_BYTES", "inline_max_bytes", _size, "a non-negative integer",
                   "Tensors up to this many bytes ride inside worker messages instead of shared memory "
                   "(default 64 KiB: DEFAULT_INLINE_MAX)."),
    ServerVariable("PYTRITON_WORKER_TEMPLATE", "worker_template", _flag, "1 or 0",
                   "1 (default): model instances' worker processes are forked from a template process that has "
                   "imported what every worker imports (numpy, zmq, the backends) and nothing else: they start "
                   "sooner and share those pages. 0: each starts in a fresh interpreter. A worker whose environment "
                   "sets a variable read at process start otherwise than the template's, or whose model's config "
                   "sets parameter PYTRITON_WORKER_START to 'fresh', starts fresh anyway (the log says why)."),
    ServerVariable("PYTRITON_PIPELINE_DEPTH", "pipeline_depth", _depth, "an integer >= 1",
                   f"Executions handed to one instance of a model without batching before the first has "
                   f"finished (default {DEFAULT_PIPELINE_DEPTH})."),
    ServerVariable("PYTRITON_MODEL_STALL_SECS", "model_stall_s", _seconds, "a number of seconds >= 0",
                   f"A model reports not ready while requests wait for it and every one of its instances has run one "
                   f"execution this long without progress (no answer, no streamed response), e.g. executions "
                   f"waiting for each other through BLS requests (default {DEFAULT_MODEL_STALL_S:g}; 0: never)."),
    ServerVariable("PYTRITON_GRPC_SERVER", "grpc_implementation", _grpc_implementation,
                   f"one of {', '.join(GRPC_IMPLEMENTATIONS)}",
                   "The gRPC transport: our own HTTP/2 server in the event loop (h2, default) or grpc.aio (grpcio)."),
    ServerVariable("PYTRITON_EVENT_LOOP", "event_loop", _event_loop, f"one of {', '.join(EVENT_LOOPS)}",
                   "The server process's event loop: uvloop's (auto, the default, where uvloop is installed; uvloop "
                   "to require it) or asyncio's own (asyncio)."),
)
"""Other variables: PYTRITON_TRITON_CONFIG_<FIELD> (TritonConfig.from_env, as in PyTriton), GLIBC_TUNABLES (when set,
pytriton leaves malloc alone), PYTRITON_NO_MALLOC_TUNING=1 (`pytriton serve` does not re-execute itself with
MALLOC_TUNABLES) and WORKER_VARIABLES below."""


@dataclasses.dataclass(frozen=True)
class WorkerVariable:
    """An environment variable read where a model runs, by `reader` (the worker layer cannot import this module).
    It is checked here too when a server configuration is built, so that a bad value stops the start."""

    name: str
    parse: Callable[[str], Any]
    expected: str
    reader: str
    doc: str


WORKER_VARIABLES = (
    WorkerVariable("PYTRITON_OUTPUT_COPY_THREADS", _depth, "an integer >= 1", "pytriton.proxy.bigcopy.copy_threads",
                   "Threads that copy one output of 8 MiB or more into a client's system shared-memory region or the "
                   "worker's response arena, the model's own thread included (default min(4, the CPUs the process "
                   "may run on); 1: one thread, as before). A bad value seen only by a worker is logged there and "
                   "the default used."),
)


def server_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """ServerConfig field values from the variables that are set in `environ` (os.environ by default)."""
    environ = os.environ if environ is None else environ
    for worker_variable in WORKER_VARIABLES:  # (checked only: the workers inherit the environment)
        text = environ.get(worker_variable.name)
        if text is not None and text.strip():
            try:
                worker_variable.parse(text)
            except ValueError:
                raise ValueError(f"{worker_variable.name}={text!r}: expected {worker_variable.expected}") from None
    values = {}
    for variable in SERVER_VARIABLES:
        text = environ.get(variable.name)
        if text is None:
            continue
        try:
            values[variable.field] = variable.parse(text)
        except ValueError:
            raise ValueError(f"{variable.name}={text!r}: expected {variable.expected}") from None
    return values


def malloc_tunables(environ: Mapping[str, str] | None = None) -> str | None:
    """The GLIBC_TUNABLES value `pytriton serve` re-executes itself with, or None to leave malloc alone."""
    environ = os.environ if environ is None else environ
    if "GLIBC_TUNABLES" in environ or environ.get("PYTRITON_NO_MALLOC_TUNING") == "1":
        return None
    return MALLOC_TUNABLES


def triton_config_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`PYTRITON_TRITON_CONFIG_<FIELD>` variables as {field: text} (TritonConfig.from_env, as in PyTriton)."""
    environ = os.environ if environ is None else environ
    prefix = TRITON_CONFIG_PREFIX
    return {key[len(prefix) :].lower(): value for key, value in environ.items() if key.startswith(prefix)}
