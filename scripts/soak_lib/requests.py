"""One request of each kind the soak sends, through the real clients (tritonclient grpc, http, grpc.aio) or a
raw socket for HTTP connections closed mid-request. A request that answers wrong raises WrongResult.

Kinds: `{grpc,http}-{small,1mib}[-shm]` (16 floats or 1 MiB, with the tensors in system shared memory that the
slot registered itself), `grpc-deadline` (client_timeout 0.5-2 ms), `http-close` (the connection is closed
mid-body or right after the request), `aio-grpc` and `aio-cancel` (grpc.aio, the task cancelled after 0-2 ms).
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aiogrpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc._client import MAX_GRPC_MESSAGE_SIZE

MODEL = "double"
FLOATS = {"small": 16, "1mib": 262144}
REGION_BYTES = FLOATS["1mib"] * 4
ORDINARY_KINDS = [f"{p}-{s}{m}" for p in ("grpc", "http") for s in FLOATS for m in ("", "-shm")]
SYNC_CANCELLING_KINDS = ["grpc-deadline", "http-close"]
AIO_KINDS = ["aio-grpc", "aio-cancel"]  # ordinary, cancelling
ALL_KINDS = ORDINARY_KINDS + SYNC_CANCELLING_KINDS + AIO_KINDS
# A channel (and TCP connection) per client, as separate client programs would have; the message limits
# tritonclient sets when no channel_args are given.
GRPC_CHANNEL_ARGS = [("grpc.use_local_subchannel_pool", 1),
                     ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
                     ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE)]


class WrongResult(Exception):
    pass


def check_double(kind: str, x: np.ndarray, y: np.ndarray | None) -> None:
    if y is None:
        raise WrongResult(f"wrong result ({kind}): no OUTPUT")
    if y.shape != x.shape or not np.array_equal(y, x * np.float32(2)):
        bad = int(np.count_nonzero(y.reshape(-1)[: x.size] != (x * 2).reshape(-1)[: y.size])) if y.size else x.size
        raise WrongResult(f"wrong result ({kind}): shape {list(y.shape)}, {bad} of {x.size} values differ from 2x")


class Inputs:
    """Input tensors that differ from one request to the next (so a stale or mixed-up answer is seen)."""

    def __init__(self, seed: int) -> None:
        self._base = {s: np.arange(n, dtype=np.float32).reshape(1, n) for s, n in FLOATS.items()}
        self._n = seed % 1000 * 1000

    def next(self, size: str) -> np.ndarray:
        self._n = (self._n + 1) % 1_000_000  # values stay below 2^24: exact in float32, and so is 2x
        return self._base[size] + np.float32(self._n)


class SyncSlot:
    """One client thread's connections and shared-memory regions; `send(kind)` makes one request.

    The regions (input and output, 1 MiB each) are created and registered at start and unregistered and
    removed by close(); even slots register over gRPC, odd ones over HTTP.
    """

    def __init__(self, grpc_url: str, http_url: str, region_prefix: str, index: int, timeout_s: float,
                 rng: random.Random) -> None:
        self.grpc_url, self.http_url, self.timeout_s, self.rng = grpc_url, http_url, timeout_s, rng
        self.grpc = grpcclient.InferenceServerClient(grpc_url, channel_args=GRPC_CHANNEL_ARGS)
        self.http = httpclient.InferenceServerClient(http_url, connection_timeout=timeout_s, network_timeout=timeout_s)
        self.inputs = Inputs(index)
        self.names = {"in": f"{region_prefix}in", "out": f"{region_prefix}out"}
        self.handles: dict[str, Any] = {}
        self._registrar = self.grpc if index % 2 == 0 else self.http
        try:
            for role, name in self.names.items():
                self.handles[role] = shm.create_shared_memory_region(name, "/" + name, REGION_BYTES)
                self._register(name)
        except BaseException:
            self.close()
            raise

    def _register(self, name: str) -> None:
        if self._registrar is self.grpc:
            self.grpc.register_system_shared_memory(name, "/" + name, REGION_BYTES, client_timeout=self.timeout_s)
        else:
            self.http.register_system_shared_memory(name, "/" + name, REGION_BYTES)

    def close(self) -> list[str]:
        """Unregister and remove the regions, close the clients; the errors met on the way."""
        errors = []
        for name in self.names.values():
            try:
                if self._registrar is self.grpc:
                    self.grpc.unregister_system_shared_memory(name, client_timeout=self.timeout_s)
                else:
                    self.http.unregister_system_shared_memory(name)
            except Exception as e:  # noqa: BLE001 (reported, and the regions are removed all the same)
                errors.append(f"unregister '{name}': {e}")
        for handle in self.handles.values():
            shm.destroy_shared_memory_region(handle)
        self.handles.clear()
        self.grpc.close()
        self.http.close()
        return errors

    def send(self, kind: str) -> str:
        """One request of this kind: `ok` or `cancelled`; raises on an error."""
        if kind == "grpc-deadline":
            return self._grpc_deadline()
        if kind == "http-close":
            return self._http_close()
        protocol, size, *with_shm = kind.split("-")
        x = self.inputs.next(size)
        y = (self._grpc if protocol == "grpc" else self._http)(x, bool(with_shm))
        check_double(kind, x, y)
        return "ok"

    def _shm_in(self, x: np.ndarray) -> int:
        shm.set_shared_memory_region(self.handles["in"], [x])
        return x.nbytes

    def _shm_out(self, x: np.ndarray) -> np.ndarray:
        return np.array(shm.get_contents_as_numpy(self.handles["out"], np.float32, list(x.shape)))

    def _grpc(self, x: np.ndarray, with_shm: bool) -> np.ndarray | None:
        inp = grpcclient.InferInput("INPUT", list(x.shape), "FP32")
        out = grpcclient.InferRequestedOutput("OUTPUT")
        if with_shm:
            inp.set_shared_memory(self.names["in"], self._shm_in(x))
            out.set_shared_memory(self.names["out"], x.nbytes)
        else:
            inp.set_data_from_numpy(x)
        result = self.grpc.infer(MODEL, [inp], outputs=[out], client_timeout=self.timeout_s)
        return self._shm_out(x) if with_shm else result.as_numpy("OUTPUT")

    def _http(self, x: np.ndarray, with_shm: bool) -> np.ndarray | None:
        inp = httpclient.InferInput("INPUT", list(x.shape), "FP32")
        out = httpclient.InferRequestedOutput("OUTPUT", binary_data=True)
        if with_shm:
            inp.set_shared_memory(self.names["in"], self._shm_in(x))
            out.set_shared_memory(self.names["out"], x.nbytes)
        else:
            inp.set_data_from_numpy(x, binary_data=True)
        result = self.http.infer(MODEL, [inp], outputs=[out])
        return self._shm_out(x) if with_shm else result.as_numpy("OUTPUT")

    def _grpc_deadline(self) -> str:
        """A request whose deadline (0.5-2 ms) usually passes before the answer: the client cancels it."""
        size = self.rng.choice(list(FLOATS))
        x = self.inputs.next(size)
        inp = grpcclient.InferInput("INPUT", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = self.grpc.infer(MODEL, [inp], client_timeout=self.rng.uniform(0.0005, 0.002))
        check_double("grpc-deadline", x, result.as_numpy("OUTPUT"))
        return "ok"

    def _http_close(self) -> str:
        """An HTTP/1.1 binary-tensor request on a connection of its own, closed mid-body or just after the request
        (half of the time with a reset, SO_LINGER 0) without reading the answer."""
        x = self.inputs.next(self.rng.choice(list(FLOATS)))
        request = http_request_bytes(self.http_url, x)
        mid_body = self.rng.random() < 0.5
        with socket.create_connection(_host_port(self.http_url), timeout=self.timeout_s) as sock:
            if self.rng.random() < 0.5:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(request[: len(request) - x.nbytes // 2] if mid_body else request)
            if not mid_body:
                sock.settimeout(self.rng.uniform(0, 0.002))
                try:
                    if sock.recv(1):
                        return "ok"  # the answer began before we closed
                except (TimeoutError, BlockingIOError):
                    pass
        return "cancelled"


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.rsplit(":", 1)
    return host, int(port)


def http_request_bytes(url: str, x: np.ndarray) -> bytes:
    """A complete Triton binary-tensor inference request (HTTP/1.1) for the model's INPUT."""
    header = json.dumps({"inputs": [{"name": "INPUT", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "OUTPUT", "parameters": {"binary_data": True}}]}).encode()
    head = (f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: {url}\r\nContent-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(header) + x.nbytes}\r\n\r\n")
    return head.encode() + header + x.tobytes()


class AioSlot:
    """A grpc.aio client in the process's event loop: ordinary requests, and requests whose task is cancelled."""

    def __init__(self, client: aiogrpcclient.InferenceServerClient, index: int, timeout_s: float,
                 rng: random.Random) -> None:
        self.client, self.timeout_s, self.rng = client, timeout_s, rng
        self.inputs = Inputs(index)

    async def send(self, kind: str) -> str:
        """One request of this kind: `ok` or `cancelled`; raises on an error."""
        x = self.inputs.next(self.rng.choice(list(FLOATS)))
        inp = aiogrpcclient.InferInput("INPUT", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        call = asyncio.ensure_future(self.client.infer(MODEL, [inp], client_timeout=self.timeout_s))
        if kind == "aio-cancel":
            await asyncio.sleep(self.rng.uniform(0, 0.002))
            call.cancel()
        try:
            result = await call
        except asyncio.CancelledError:
            if kind != "aio-cancel" or not call.cancelled():
                raise
            return "cancelled"
        check_double(kind, x, result.as_numpy("OUTPUT"))
        return "ok"
