"""Write the fuzz seeds (`tests/fuzz/corpus/<harness>/`): valid inputs, most of them what the real clients send.

    python -m tests.fuzz.make_corpus [harness ...]

Network seeds are captured from the real clients: tritonclient.http talks to a recording HTTP/1.1 server on
loopback, tritonclient.grpc to the HTTP/2 transport (`GrpcConnection`) through a recording proxy; message seeds are
tritonclient's own request messages and bodies. The rest (config.pbtxt, the command-line options) are written here
from the guide's examples. Rerunning it rewrites the seeds it makes; files it does not make (regression inputs of
fixed findings, `regress-*`) are left alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import sys
import threading
from typing import Any, Callable, Iterator

import httptools

from tests.fuzz.harness import CORPUS, HARNESSES

HTTP_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def write(harness: str, name: str, data: bytes) -> None:
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


# ---- capturing what the real clients send ---------------------------------------------------------------------------


class _HttpRequests:
    """httptools callbacks: each request of a connection as (method, url, headers, body) and its bytes."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.done: list[tuple[str, str, list[tuple[str, str]], bytes]] = []
        self._url = b""
        self._headers: list[tuple[str, str]] = []
        self._body = b""

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", [], b""

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        self.done.append((self.parser.get_method().decode(), self._url.decode("latin-1"), self._headers, self._body))


@contextlib.contextmanager
def http_recorder() -> Iterator[tuple[int, list[bytes], list[tuple[str, str, list[tuple[str, str]], bytes]]]]:
    """A loopback HTTP/1.1 server answering every request `{}`: (its port, each connection's bytes, each request)."""
    listener = socket.create_server(("127.0.0.1", 0))
    wires: list[bytes] = []
    requests: list[tuple[str, str, list[tuple[str, str]], bytes]] = []
    threads = []

    def serve(conn: socket.socket) -> None:
        wire = bytearray()
        parsed = _HttpRequests()
        with conn:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                wire += chunk
                before = len(parsed.done)
                parsed.parser.feed_data(chunk)
                for _ in parsed.done[before:]:
                    conn.sendall(HTTP_ANSWER)
        wires.append(bytes(wire))
        requests.extend(parsed.done)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=serve, args=(conn,), daemon=True)
            thread.start()
            threads.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1], wires, requests
    finally:
        listener.close()
        for thread in threads:
            thread.join(10)
        acceptor.join(10)


def capture_http() -> tuple[list[bytes], list[tuple[str, str, list[tuple[str, str]], bytes]]]:
    """What tritonclient.http sends for the calls the harnesses read: one connection's bytes per client, and every
    request."""
    import numpy as np  # noqa: PLC0415
    import tritonclient.http as httpclient  # noqa: PLC0415

    def ignore(call: Callable[[], Any]) -> None:
        with contextlib.suppress(Exception):  # (the recorder's `{}` is not what the client expects of every call)
            call()

    floats = np.arange(16, dtype=np.float32).reshape(1, 16)
    text = np.array([["hello", "wörld"]], dtype=np.object_)
    with http_recorder() as (port, wires, requests):
        for compression in (None, "gzip", "deflate"):
            client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
            binary = httpclient.InferInput("INPUT", [1, 16], "FP32")
            binary.set_data_from_numpy(floats)
            as_json = httpclient.InferInput("INPUT", [1, 16], "FP32")
            as_json.set_data_from_numpy(floats, binary_data=False)
            strings = httpclient.InferInput("TEXT", [1, 2], "BYTES")
            strings.set_data_from_numpy(text, binary_data=compression is None)
            outputs = [httpclient.InferRequestedOutput("OUTPUT", binary_data=True)]
            ignore(lambda: client.infer("m", [binary], outputs=outputs, request_compression_algorithm=compression))
            ignore(lambda: client.infer("m", [as_json], request_id="1", sequence_id=7, sequence_start=True,
                                        request_compression_algorithm=compression))
            numbers = httpclient.InferInput("N", [1, 2], "INT32")
            numbers.set_data_from_numpy(np.array([[3, -4]], dtype=np.int32), binary_data=compression is not None)
            ignore(lambda: client.infer("s", [strings, numbers], model_version="1", priority=1, timeout=100,
                                        outputs=[httpclient.InferRequestedOutput("OUT", binary_data=False),
                                                 httpclient.InferRequestedOutput("NOUT", class_count=1)],
                                        request_compression_algorithm=compression))
            if compression is None:
                region = httpclient.InferInput("INPUT", [1, 16], "FP32")
                region.set_shared_memory("region", 64)
                out = httpclient.InferRequestedOutput("OUTPUT")
                out.set_shared_memory("out-region", 64, offset=64)
                ignore(lambda: client.infer("m", [region], outputs=[out]))
                ignore(lambda: client.is_server_live())
                ignore(lambda: client.get_model_metadata("m"))
                ignore(lambda: client.register_system_shared_memory("region", "/client_region", 128))
                ignore(lambda: client.register_system_shared_memory("out-region", "/client_region", 64, offset=64))
                ignore(lambda: client.register_cuda_shared_memory("gpu", base64.b64encode(bytes(64)), 0, 1024))
                ignore(lambda: client.unregister_system_shared_memory("region"))
                ignore(lambda: client.get_system_shared_memory_status())
                ignore(lambda: client.load_model("m"))
                ignore(lambda: client.load_model("m", config=json.dumps(_CONFIG_JSON)))
                ignore(lambda: client.load_model("up", config=json.dumps(_CONFIG_JSON),
                                                 files={"file:1/model.py": _MODEL_PY}))
                ignore(lambda: client.unload_model("m", unload_dependents=True))
                ignore(lambda: client.get_model_repository_index())
            client.close()
    return wires, requests


_MODEL_PY = b"""import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", pb_utils.get_input_tensor_by_name(r, "INPUT")
                                                            .as_numpy())]) for r in requests]
"""
_CONFIG_JSON = {"backend": "python", "max_batch_size": 8,
                "input": [{"name": "INPUT", "data_type": "TYPE_FP32", "dims": [-1]}],
                "output": [{"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [-1]}],
                "dynamic_batching": {"max_queue_delay_microseconds": 100}}


def http1(wires: list[bytes]) -> None:
    for index, wire in enumerate(wires):
        write("http1", f"tritonclient-{index}", wire)
    hand = {  # what other clients do: curl's chunked bodies and Expect, pipelining, HEAD, a refusal
        "chunked": b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                   b"Expect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "pipelined": b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\nHEAD /v2 HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"POST /v2/repository/index HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        "repeated": b"GET /v2?x=1 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\nCookie: a\r\n\r\n",
        "http10": b"GET /v2/health/ready HTTP/1.0\r\n\r\n",
        "large-declared": b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                          b"Inference-Header-Content-Length: 20\r\n\r\n" + b"x" * 200,
    }
    for name, wire in hand.items():
        write("http1", name, wire)


def as_request(method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The HTTP harnesses' input: "METHOD URL", header lines, an empty line, the body (lines end with LF)."""
    lines = [f"{method} {url}"] + [f"{name}: {value}" for name, value in headers]
    return ("\n".join(lines) + "\n\n").encode("latin-1") + body


def http_requests(requests: list[tuple[str, str, list[tuple[str, str]], bytes]]) -> None:
    """Seeds of the harnesses that read one HTTP request (the app's routes), from the captured requests."""
    counts: dict[str, int] = {}
    write("http_infer", "raw", as_request("POST", "/v2/models/raw/infer",
                                          [("Inference-Header-Content-Length", "0")], bytes(range(32))))
    header = json.dumps({"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": 9}}],
                         "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}]}).encode()
    write("http_infer", "bytes-binary", as_request("POST", "/v2/models/s/infer",
                                                   [("Inference-Header-Content-Length", str(len(header)))],
                                                   header + b"\x05\x00\x00\x00hello"))
    for method, url, headers, body in requests:
        path = url.split("?")[0]
        if path.endswith("/infer"):
            harness = "http_infer"
        elif "sharedmemory" in path and path.endswith("/register"):
            harness = "shm_register"
        elif path.startswith("/v2/repository/"):
            harness = "repository"
        else:
            continue
        counts[harness] = counts.get(harness, 0) + 1
        dropped = ("host", "user-agent", "accept-encoding", "connection", "content-length")
        kept = [(n, v) for n, v in headers if n.lower() not in dropped]
        write(harness, f"tritonclient-{counts[harness]}", as_request(method, url, kept, body))


def grpc_messages() -> None:
    """Shared-memory and repository requests as tritonclient.grpc builds them ("GRPC <method>", LF, the message)."""
    from tritonclient.grpc import service_pb2 as pb  # noqa: PLC0415

    def grpc(harness: str, name: str, method: str, message: Any) -> None:
        write(harness, name, f"GRPC {method}\n".encode() + message.SerializeToString())

    grpc("shm_register", "grpc-system", "SystemSharedMemoryRegister",
         pb.SystemSharedMemoryRegisterRequest(name="region", key="/client_region", offset=0, byte_size=128))
    grpc("shm_register", "grpc-system-offset", "SystemSharedMemoryRegister",
         pb.SystemSharedMemoryRegisterRequest(name="out", key="client_region", offset=64, byte_size=64))
    grpc("shm_register", "grpc-cuda", "CudaSharedMemoryRegister",
         pb.CudaSharedMemoryRegisterRequest(name="gpu", raw_handle=bytes(range(64)), device_id=0, byte_size=1024))
    grpc("shm_register", "grpc-unregister", "SystemSharedMemoryUnregister",
         pb.SystemSharedMemoryUnregisterRequest(name="region"))
    grpc("shm_register", "grpc-status", "CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest(name="gpu"))
    config = pb.ModelRepositoryParameter(string_param=json.dumps(_CONFIG_JSON))
    grpc("repository", "grpc-load", "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="m"))
    grpc("repository", "grpc-load-config", "RepositoryModelLoad",
         pb.RepositoryModelLoadRequest(model_name="m", parameters={"config": config}))
    grpc("repository", "grpc-load-files", "RepositoryModelLoad", pb.RepositoryModelLoadRequest(
        model_name="up", parameters={"config": config,
                                     "file:1/model.py": pb.ModelRepositoryParameter(bytes_param=_MODEL_PY)}))
    grpc("repository", "grpc-unload", "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(
        model_name="m", parameters={"unload_dependents": pb.ModelRepositoryParameter(bool_param=True)}))
    grpc("repository", "grpc-index", "RepositoryIndex", pb.RepositoryIndexRequest(ready=True))


def _h2_wire(calls: Callable[[Any], None]) -> bytes:
    """What tritonclient.grpc sends on its one connection while `calls(client)` runs, to our HTTP/2 transport."""
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    from pytriton.frontend.h2 import connection as h2  # noqa: PLC0415
    from tests.fuzz.h2 import METHODS  # noqa: PLC0415

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    recorded = bytearray()

    async def start() -> tuple[asyncio.Server, asyncio.Server]:
        server = await loop.create_server(lambda: h2.GrpcConnection(METHODS), "127.0.0.1", 0)
        target = server.sockets[0].getsockname()[1]

        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)

            async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
                while data := await src.read(65536):
                    if keep:
                        recorded.extend(data)
                    dst.write(data)
                dst.close()

            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False),
                                 return_exceptions=True)

        proxy = await asyncio.start_server(forward, "127.0.0.1", 0)
        return server, proxy

    server, proxy = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{proxy.sockets[0].getsockname()[1]}")
    try:
        calls(client)
    finally:
        client.close()

        async def stop() -> None:
            proxy.close()
            server.close()
            await asyncio.sleep(0.2)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    return bytes(recorded)


def h2_frames() -> None:
    import queue  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    def inputs() -> list[Any]:
        given = grpcclient.InferInput("INPUT", [1, 16], "FP32")
        given.set_data_from_numpy(np.arange(16, dtype=np.float32).reshape(1, 16))
        return [given]

    def infer(client: Any) -> None:
        client.infer("m", inputs(), request_id="1")
        client.infer("m", inputs(), request_id="2", headers={"x-custom": "v", "trace-bin": b"\x00\xffabc"})

    def compressed(client: Any) -> None:
        client.infer("m", inputs(), compression_algorithm="gzip")
        client.infer("m", inputs(), compression_algorithm="deflate", client_timeout=30)

    def streaming(client: Any) -> None:
        answers: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: answers.put(error))
        for n in range(3):
            client.async_stream_infer("m", inputs(), request_id=str(n), sequence_id=5, sequence_start=n == 0)
        for _ in range(3):
            answers.get(timeout=10)
        client.stop_stream()

    def live(client: Any) -> None:
        for _ in range(3):
            client.is_server_live()

    for name, calls in (("infer", infer), ("compressed", compressed), ("stream", streaming), ("live", live)):
        write("h2", f"tritonclient-{name}", _h2_wire(calls))


def model_configs() -> None:
    """The config.pbtxt files of this repository (its tests' repositories, the deployment's), named `m`."""
    import re  # noqa: PLC0415

    repo = CORPUS.parents[2]
    paths = sorted(p for p in repo.glob("**/config.pbtxt") if ".venv" not in p.parts and ".fuzz" not in p.parts)
    for path in paths:
        text = re.sub(rb'^(\s*name\s*:\s*)"[^"]*"', rb'\1"m"', path.read_bytes(), count=1, flags=re.M)
        write("model_config", f"{path.parent.parent.name}-{path.parent.name}", text)


def cli_configs() -> None:
    for name, lines in {
        "level": ["level=TIMESTAMPS", "rate=1", "count=-1"],
        "triton-file": ["triton,file=/tmp/trace.json", "triton,log-frequency=10", "mode=triton"],
        "split-mode": ["triton", "file=trace.json", "level=TENSORS", "level=OFF"],
        "otel": ["mode=opentelemetry", "opentelemetry,url=localhost:4318/v1/traces",
                 "opentelemetry,resource=service.name=pytriton", "opentelemetry,bsp_max_queue_size=4096",
                 "opentelemetry,bsp_schedule_delay=1000", "opentelemetry,bsp_max_export_batch_size=256"],
        "log-frequency": ["log_frequency=5", "level=timestamps"],
    }.items():
        write("trace_config", name, "\n".join(lines).encode())
    for name, lines in {
        "summary": ["summary_latencies=true", "summary_quantiles=0.5:0.05,0.99:0.001"],
        "histogram": ["histogram_latencies=true", "counter_latencies=false"],
        "quoted": ['summary_quantiles="0.9:0.01,0.999:0.001"', "summary_latencies=on"],
    }.items():
        write("metrics_config", name, "\n".join(lines).encode())
    for name, lines in {
        "local": ["local,size=1048576"],
        "quoted": ['local,size="67108864"', "local,size=0"],
    }.items():
        write("cache_config", name, "\n".join(lines).encode())


def grpc_infer() -> None:
    """ModelInferRequest messages as tritonclient.grpc builds them (`InferenceServerClient.infer`)."""
    import numpy as np  # noqa: PLC0415
    import tritonclient.grpc as grpcclient  # noqa: PLC0415
    from tritonclient.grpc import service_pb2 as pb  # noqa: PLC0415
    from tritonclient.grpc._utils import _get_inference_request  # noqa: PLC0415

    def message(model: str, inputs: list, outputs: list | None = None, **options: object) -> bytes:
        settings = dict(model_version="", request_id="", sequence_id=0, sequence_start=False, sequence_end=False,
                        priority=0, timeout=None, parameters=None)
        settings.update(options)
        return _get_inference_request(model, inputs, outputs=outputs, **settings).SerializeToString()

    def tensor(name: str, array: np.ndarray, datatype: str, shm: tuple[str, int, int] | None = None):
        given = grpcclient.InferInput(name, list(array.shape), datatype)
        if shm is not None:
            given.set_shared_memory(*shm)
        else:
            given.set_data_from_numpy(array)
        return given

    floats = np.arange(4, dtype=np.float32).reshape(1, 4)
    text = np.array([b"hello"], dtype=np.object_)
    write("grpc_infer", "plain", message("m", [tensor("INPUT", floats, "FP32")],
                                         [grpcclient.InferRequestedOutput("OUTPUT")]))
    write("grpc_infer", "id-sequence", message("m", [tensor("INPUT", floats, "FP32")], request_id="7",
                                               sequence_id=42, sequence_start=True))
    write("grpc_infer", "string-sequence", message("m", [tensor("INPUT", floats, "FP32")], sequence_id="abc",
                                                   sequence_end=True, priority=2, timeout=1000))
    write("grpc_infer", "bytes", message("s", [tensor("TEXT", text, "BYTES"),
                                               tensor("N", np.array([1, 2], dtype=np.int32), "INT32")],
                                         [grpcclient.InferRequestedOutput("OUT", class_count=2)]))
    write("grpc_infer", "shm", message("m", [tensor("INPUT", floats, "FP32", ("region", 16, 0))],
                                       [_shm_output("OUTPUT")]))
    write("grpc_infer", "parameters", message("m", [tensor("INPUT", floats, "FP32")],
                                              parameters={"custom": "x", "flag": True, "n": 3}))
    contents = pb.ModelInferRequest(model_name="s")  # typed `contents` (tritonclient sends raw; other clients do not)
    entry = contents.inputs.add(name="N", datatype="INT32", shape=[2])
    entry.contents.int_contents.extend([5, -1])
    entry = contents.inputs.add(name="TEXT", datatype="BYTES", shape=[1])
    entry.contents.bytes_contents.append(b"hi")
    write("grpc_infer", "contents", contents.SerializeToString())


def _shm_output(name: str):
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    output = grpcclient.InferRequestedOutput(name)
    output.set_shared_memory("out-region", 16, 4)
    return output


def network() -> None:
    wires, requests = capture_http()
    http1(wires)
    http_requests(requests)
    grpc_messages()
    h2_frames()


MAKERS = {
    "http1": network,
    "h2": network,
    "http_infer": network,
    "shm_register": network,
    "repository": network,
    "grpc_infer": grpc_infer,
    "model_config": model_configs,
    "trace_config": cli_configs,
    "metrics_config": cli_configs,
    "cache_config": cli_configs,
}


def main(names: list[str]) -> None:
    done = set()
    for name in names or list(HARNESSES):
        maker = MAKERS[name]
        if maker not in done:
            maker()
            done.add(maker)
    for name in names or list(HARNESSES):
        print(f"{name}: {len(list((CORPUS / name).iterdir()))} seeds")


if __name__ == "__main__":
    main(sys.argv[1:])
