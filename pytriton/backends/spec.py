"""What a worker needs to serve one model instance (`WorkerSpec`), built in one place per kind of worker: a worker
process the server spawns (`for_process`, passed as JSON on its command line) and a thread of the user's process
that hosts a callable bound with `Triton.bind` (`for_thread`)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
from typing import Any

from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.control import ServerInfo

WATCH_KINDS = ("parent", "pidfd", "pid", "none")


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """One model instance's worker: where its server is, who it is, what it runs and how it watches the server.

    `watch` says how the worker notices that the server is gone: "parent" (a spawned worker: its parent changes),
    "pidfd" (a worker forked from the template: its parent is the template; it holds a pidfd of the server), "pid" (a
    thread in another process: the server's pid disappears) or "none".
    """

    address: str  # the server's ROUTER (ipc://...)
    identity: str  # this instance's identity on the router: <model>#<index>#<generation>
    tag: str  # the server's tag, in every shared-memory segment name
    server_pid: int
    inline_max: int  # tensors up to this size ride in the message instead of shared memory
    config: TritonModelConfig
    callable: str | None = None  # import path ("module:attr") a worker process imports; None for a thread
    instance: int = 0
    log_level: str = "INFO"
    model_log: str = ""  # the file of the server's logging settings its model's pb_utils.Logger follows (model_log.py)
    watch: str = "parent"
    arena_kind: str = "rsp"  # distinguishes the response arenas of several workers in one process

    def __post_init__(self) -> None:
        if self.watch not in WATCH_KINDS:
            raise ValueError(f"WorkerSpec.watch must be one of {', '.join(WATCH_KINDS)}, got {self.watch!r}")

    @property
    def label(self) -> str:
        return f"model '{self.config.model_name}' instance {self.instance}"

    def to_json(self) -> str:
        fields: dict[str, Any] = dataclasses.asdict(self)
        fields["config"] = self.config.to_dict()
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        fields = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in fields.items() if k in known}
        values["config"] = TritonModelConfig.from_dict(fields["config"])
        return cls(**values)

    @classmethod
    def for_process(
        cls,
        *,
        address: str,
        identity: str,
        tag: str,
        inline_max: int,
        config: TritonModelConfig,
        callable: str,
        instance: int,
        log_level: str,
        model_log: str = "",
        forked: bool = False,
    ) -> WorkerSpec:
        """A worker process that this (the server) process spawns: it imports `callable` and watches its parent, or
        the server's pidfd when it is `forked` from the worker template (whose child it is)."""
        return cls(address=address, identity=identity, tag=tag, server_pid=os.getpid(), inline_max=inline_max,
                   config=config, callable=callable, instance=instance, log_level=log_level,
                   model_log=model_log, watch="pidfd" if forked else "parent")

    @classmethod
    def for_thread(cls, server: ServerInfo, identity: str, config: TritonModelConfig, instance: int) -> WorkerSpec:
        """A thread of the user's process hosting a bound callable for the server described by `server`; each gets
        a response arena of its own kind, as they share one process (and one pid in segment names)."""
        return cls(address=server.address, identity=identity, tag=server.tag, server_pid=server.server_pid,
                   inline_max=server.inline_max, config=config, instance=instance, watch="pid",
                   arena_kind=_next_thread_arena_kind())


def _letters(index: int) -> str:
    out = ""
    while True:
        out = chr(ord("a") + index % 26) + out
        index = index // 26 - 1
        if index < 0:
            return out


_thread_arenas = itertools.count()
_thread_arena_lock = threading.Lock()


def _next_thread_arena_kind() -> str:
    with _thread_arena_lock:
        return "rspt" + _letters(next(_thread_arenas))
