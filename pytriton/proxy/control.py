"""The control channel: typed messages between the process that started or joined a server (`pytriton.triton`)
and the server's control service, and the client end (a DEALER on the server's ROUTER).

A message travels as JSON: `{"v": 1, "op": "load", ...fields}`; a reply adds `"ok": true` and the server's
connection details, or carries `"ok": false, "error": "..."`. Parsing is versioning-safe: fields this version
does not know are ignored, fields it lacks take their defaults; a missing required field, a field of the wrong
type or an unknown operation is a `ControlMessageError` that names the operation and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import zmq

from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.messages import ServerToWorker, WorkerToServer

CONTROL_VERSION = 1
ALIVE_CHECK_MS = 100
HOSTING_KINDS = ("spawn", "external")


class ControlMessageError(ValueError):
    """A control message that cannot be understood (unknown operation, missing or malformed field); `op` is the
    operation it names, when it names one."""

    op: str | None = None


class ControlError(RuntimeError):
    """The server refused or failed a control request."""


def _decode(hint: Any, value: Any, where: str) -> Any:
    """`value` (from JSON) as the field type `hint`; ControlMessageError names `where` when it does not fit."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _decode(args[0], value, where)
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ControlMessageError(f"{where}: expected a list, got {type(value).__name__}")
        return [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is bool or hint is str:
        if not isinstance(value, hint):
            raise ControlMessageError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (hint is int and isinstance(value, float)):
            raise ControlMessageError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
        return hint(value)
    if hint is TritonModelConfig:
        try:
            return TritonModelConfig.from_dict(value)
        except Exception as exc:  # noqa: BLE001 - any malformed config is the sender's error
            raise ControlMessageError(f"{where}: invalid model configuration: {type(exc).__name__}: {exc}") from None
    if dataclasses.is_dataclass(hint):
        return _from_fields(hint, value, where)
    raise TypeError(f"{where}: unsupported field type {hint!r}")  # a bug in a message definition


def _from_fields(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ControlMessageError(f"{where}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in data:
            values[field.name] = _decode(hints[field.name], data[field.name], f"{where}: field '{field.name}'")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ControlMessageError(f"{where}: missing field '{field.name}'")
    try:
        return cls(**values)
    except ValueError as exc:
        raise ControlMessageError(f"{where}: {exc}") from None


def _to_fields(message: Any) -> dict[str, Any]:
    fields = {}
    for field in dataclasses.fields(message):
        value = getattr(message, field.name)
        if isinstance(value, TritonModelConfig):
            value = value.to_dict()
        elif dataclasses.is_dataclass(value):
            value = _to_fields(value)
        fields[field.name] = value
    return fields


# ---- replies ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ServerInfo:
    """Where and how a process hosting model instances connects to the server (sent with every reply)."""

    address: str
    tag: str
    server_pid: int
    inline_max: int


@dataclasses.dataclass(frozen=True)
class ControlReply:
    server: ServerInfo

    def to_json(self, op: str) -> str:
        return json.dumps({"v": CONTROL_VERSION, "op": op, "ok": True, **_to_fields(self)})


@dataclasses.dataclass(frozen=True)
class InfoReply(ControlReply):
    pass


@dataclasses.dataclass(frozen=True)
class LoadReply(ControlReply):
    identities: list[str] = dataclasses.field(default_factory=list)  # of the instances to host ("external")


@dataclasses.dataclass(frozen=True)
class UnloadReply(ControlReply):
    pass


@dataclasses.dataclass(frozen=True)
class ModelReadyReply(ControlReply):
    ready: bool = False


def error_reply(op: str | None, error: str) -> str:
    """The JSON of a failed request's reply."""
    return json.dumps({"v": CONTROL_VERSION, "op": op, "ok": False, "error": error})


# ---- requests --------------------------------------------------------------------------------------------
R = TypeVar("R", bound=ControlReply)


@dataclasses.dataclass(frozen=True)
class ControlRequest(Generic[R]):
    OP: ClassVar[str] = ""
    REPLY: ClassVar[type[ControlReply]] = ControlReply

    def to_json(self) -> str:
        return json.dumps({"v": CONTROL_VERSION, "op": self.OP, **_to_fields(self)})

    def parse_reply(self, text: str) -> R:
        """This request's reply from its JSON; ControlError if the server refused or failed it."""
        data = _load_object(text, f"reply to '{self.OP}'")
        if data.get("ok") is not True:
            raise ControlError(str(data.get("error") or f"the server failed '{self.OP}' without saying why"))
        return typing.cast(R, _from_fields(self.REPLY, data, f"reply to '{self.OP}'"))


@dataclasses.dataclass(frozen=True)
class InfoRequest(ControlRequest[InfoReply]):
    OP: ClassVar[str] = "info"
    REPLY: ClassVar[type[ControlReply]] = InfoReply


@dataclasses.dataclass(frozen=True)
class LoadRequest(ControlRequest[LoadReply]):
    """Load (or replace) a model: its instances are spawned worker processes running `callable` ("spawn"), or
    threads the requesting process hosts ("external", which must connect within `timeout_s`)."""

    OP: ClassVar[str] = "load"
    REPLY: ClassVar[type[ControlReply]] = LoadReply
    config: TritonModelConfig
    hosting: str = "spawn"
    callable: str | None = None
    timeout_s: float = 300.0
    trace_config: list[str] | None = None  # the model's own trace settings (bind(trace_config=...))

    def __post_init__(self) -> None:
        if self.hosting not in HOSTING_KINDS:
            raise ValueError(f"field 'hosting' must be one of {', '.join(HOSTING_KINDS)}, got {self.hosting!r}")
        if self.hosting == "spawn" and not self.callable:
            raise ValueError("field 'callable' is required when hosting is 'spawn'")


@dataclasses.dataclass(frozen=True)
class UnloadRequest(ControlRequest[UnloadReply]):
    OP: ClassVar[str] = "unload"
    REPLY: ClassVar[type[ControlReply]] = UnloadReply
    model: str


@dataclasses.dataclass(frozen=True)
class ModelReadyRequest(ControlRequest[ModelReadyReply]):
    OP: ClassVar[str] = "model_ready"
    REPLY: ClassVar[type[ControlReply]] = ModelReadyReply
    model: str


REQUESTS: dict[str, type[ControlRequest[Any]]] = {
    cls.OP: cls for cls in (InfoRequest, LoadRequest, UnloadRequest, ModelReadyRequest)
}


def _load_object(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ControlMessageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ControlMessageError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def parse_request(text: str) -> ControlRequest[Any]:
    """A request from its JSON (server side); ControlMessageError names what is wrong with it."""
    data = _load_object(text, "control request")
    op = data.get("op")
    try:
        cls = REQUESTS.get(op) if isinstance(op, str) else None
        if cls is None:
            raise ControlMessageError(f"unknown control operation {op!r} (known: {', '.join(REQUESTS)})")
        return typing.cast(ControlRequest[Any], _from_fields(cls, data, f"control '{op}'"))
    except ControlMessageError as exc:
        exc.op = op if isinstance(op, str) else None
        raise


# ---- the client end --------------------------------------------------------------------------------------
class ControlClient:
    """A DEALER on the server's ROUTER that sends typed requests and waits for their replies (thread-safe)."""

    def __init__(self, address: str, context: zmq.Context[zmq.Socket[bytes]] | None = None,
                 alive: Callable[[], bool] | None = None):
        """`alive` tells whether the server still runs; a call stops waiting as soon as it says no."""
        self.address = address
        self._alive = alive
        self._ctx = context or zmq.Context.instance()
        self._socket = self._ctx.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.IDENTITY, f"control#{os.getpid()}#{id(self):x}".encode())
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)
        self._lock = threading.Lock()

    def call(self, request: ControlRequest[R], timeout_s: float = 300.0) -> R:
        message = WorkerToServer(kind=WorkerToServer.CONTROL, control=request.to_json())
        with self._lock:
            self._socket.send(message.SerializeToString())
            deadline = time.monotonic() + timeout_s
            while not self._socket.poll(ALIVE_CHECK_MS, zmq.POLLIN):
                if self._alive is not None and not self._alive():
                    raise ControlError(f"the server is not running (no answer to '{request.OP}')")
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the server did not answer '{request.OP}' within {timeout_s:.0f} s")
            reply = ServerToWorker.FromString(self._socket.recv())
        return request.parse_reply(reply.control)

    def close(self) -> None:
        self._socket.close(linger=0)
