"""Client side of the control channel: load/unload models in a running server over its worker socket."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

import zmq

from pytriton.proxy.messages import ServerToWorker, WorkerToServer


ALIVE_CHECK_MS = 100


class ControlError(RuntimeError):
    """The server refused or failed a control request."""


class ControlClient:
    """A DEALER on the server's ROUTER that sends JSON requests and waits for the answers (thread-safe)."""

    def __init__(self, address: str, context: zmq.Context | None = None, alive: Callable[[], bool] | None = None):
        """`alive` tells whether the server still runs; a call stops waiting as soon as it says no."""
        self.address = address
        self._alive = alive
        self._ctx = context or zmq.Context.instance()
        self._socket = self._ctx.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.IDENTITY, f"control#{os.getpid()}#{id(self):x}".encode())
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)
        self._lock = threading.Lock()

    def call(self, request: dict[str, Any], timeout_s: float = 300.0) -> dict[str, Any]:
        message = WorkerToServer(kind=WorkerToServer.CONTROL, control=json.dumps(request))
        with self._lock:
            self._socket.send(message.SerializeToString())
            deadline = time.monotonic() + timeout_s
            while not self._socket.poll(ALIVE_CHECK_MS, zmq.POLLIN):
                if self._alive is not None and not self._alive():
                    raise ControlError(f"the server is not running (no answer to '{request.get('op')}')")
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the server did not answer '{request.get('op')}' within {timeout_s:.0f} s")
            reply = ServerToWorker.FromString(self._socket.recv())
        answer = json.loads(reply.control)
        if not answer.get("ok"):
            raise ControlError(answer.get("error", "unknown error"))
        return answer

    def close(self) -> None:
        self._socket.close(linger=0)
