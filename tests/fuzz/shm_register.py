"""Shared-memory registration requests, system and CUDA: HTTP JSON bodies through `HttpApp` and gRPC messages through
`InferenceServicer`, both on a real `ServerCore` (with a GPU said to be present, so that CUDA registrations are read to
the end; nothing opens their handles here).

An input is either an HTTP request in the form `http_infer` reads ("METHOD URL", header lines, an empty line, the body),
or "GRPC <method>", a line feed, then the request message's bytes. The literal `client_region` in an input names a
shared-memory object this process creates (4 KiB, its own name per process, as long as the literal so that the length
fields of a message stay right), so that registrations can succeed. The route's own errors: over HTTP an answer with
Triton's status and a JSON error (500 only for Triton's "Unable to open shared memory region"); over gRPC protobuf's
DecodeError (the transport answers "Exception deserializing request!") or the call ended with a status (INTERNAL only
for that same message). After each input every region is unregistered, and no file descriptor may be left open.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import grpc
import orjson
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb

from pytriton.core.peers import unregister_shm
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.frontend.grpc.servicer import InferenceServicer
from pytriton.frontend.http.app import HttpApp
from tests.fuzz.harness import SHM_PREFIX, Finding, Harness
from tests.fuzz.http_infer import outcome, parse_request

PLACEHOLDER = b"client_region"
SEGMENT_BYTES = 4096
INTERNAL_MESSAGE = "Unable to open shared memory region"
GRPC_METHODS = {name: getattr(pb, f"{name}Request") for name in (
    "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister", "SystemSharedMemoryStatus",
    "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "CudaSharedMemoryStatus")}


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(code, details)
        self.code, self.details = code, details


class CallContext:
    def invocation_metadata(self) -> tuple[()]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise Aborted(code, details)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class ShmRegisterHarness(Harness):
    name = "shm_register"
    max_len = 2048
    memory_fixed = 2 << 20

    def setup(self) -> None:
        self.key = f"{SHM_PREFIX}{os.getpid():08d}".encode()  # (removed by the runner if libFuzzer exits first)
        assert len(self.key) == len(PLACEHOLDER)
        fd = os.open(f"/dev/shm/{self.key.decode()}", os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, SEGMENT_BYTES)
        finally:
            os.close(fd)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._start())

    async def _start(self) -> None:
        self.core = ServerCore(gpu_available=True)
        await self.core.start()
        self.app = HttpApp(self.core, LogSettings(), TraceSettings())
        self.servicer = InferenceServicer(self.core)

    def close(self) -> None:
        self.loop.close()
        os.unlink(f"/dev/shm/{self.key.decode()}")

    async def _http(self, data: bytes) -> None:
        status, body = outcome(await self.app.handle(parse_request(data)))
        if status == 200:
            return
        try:
            message = orjson.loads(body)["error"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise Finding(f"answer {status} without a JSON error", repr(body[:200])) from None
        if status >= 500 and not (status == 500 and message.startswith(INTERNAL_MESSAGE)) and status != 501:
            raise Finding(f"answer {status}", message)

    async def _grpc(self, data: bytes) -> None:
        line, _, message = data.partition(b"\n")
        method = line[len(b"GRPC "):].decode("latin-1").strip()
        request_cls: Any = GRPC_METHODS.get(method)
        if request_cls is None:
            return  # (the transport answers UNIMPLEMENTED for a method it does not know)
        try:
            request = request_cls.FromString(message)
        except DecodeError:
            return
        try:
            await getattr(self.servicer, method)(request, CallContext())
        except Aborted as exc:
            if exc.code == grpc.StatusCode.INTERNAL and not exc.details.startswith(INTERNAL_MESSAGE):
                raise Finding("call ended INTERNAL", exc.details) from None
            if exc.code == grpc.StatusCode.UNKNOWN:
                raise Finding("call ended UNKNOWN", exc.details) from None

    async def _one(self, data: bytes) -> None:
        data = data.replace(PLACEHOLDER, self.key)
        fds = _open_fds()
        try:
            if data.startswith(b"GRPC "):
                await self._grpc(data)
            else:
                await self._http(data)
        finally:
            await unregister_shm(self.core, "system")
            await unregister_shm(self.core, "cuda")
        if _open_fds() != fds:
            raise Finding("file descriptors left open", f"{fds} before, {_open_fds()} after")

    def one_input(self, data: bytes) -> None:
        self.loop.run_until_complete(self._one(data))
