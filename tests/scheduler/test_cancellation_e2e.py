"""Clients that give up (short deadlines, cancelled streams) must never wedge a model (issue 13, item 1)."""

from __future__ import annotations

import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.metrics import pending_requests
from tests._support.model_calls import ADD_SUB, add_sub_inputs
from tests._support.serving import serve
from tests._support.waits import wait_until
from tests.frontend.grpc.raw_h2 import frame

# The example declares max_batch_size 8; these tests send unbatched tensors, so the flag turns batching off.
def _assert_ordinary_calls_succeed(grpc_url: str) -> None:
    client = grpcclient.InferenceServerClient(grpc_url)
    for _ in range(50):
        result = client.infer("add_sub", add_sub_inputs(), client_timeout=10)
        assert (result.as_numpy("OUTPUT0") == 2 * np.arange(16)).all()


def deadline_storm(url: str, model: str, seconds: float, threads: int = 16) -> dict[str, int]:
    """`threads` clients call `model` with deadlines of 0.5-2 ms for `seconds`; counts what they saw."""
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "deadline": 0, "other": 0}
    lock = threading.Lock()
    others: list[str] = []

    def run(index: int) -> None:
        client = grpcclient.InferenceServerClient(url)
        inputs = add_sub_inputs()
        timeouts = (0.0005, 0.001, 0.0015, 0.002)
        n = 0
        while time.monotonic() < stop:
            n += 1
            try:
                client.infer(model, inputs, client_timeout=timeouts[(index + n) % 4])
                kind = "ok"
            except InferenceServerException as exc:
                kind = "deadline" if "Deadline" in str(exc) or "DEADLINE" in str(exc.status()) else "other"
                if kind == "other":
                    others.append(str(exc))
            with lock:
                counts[kind] += 1
        client.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not others, others[:5]
    return counts


def test_deadline_storm_leaves_the_model_working():
    with serve("examples.add_sub:add_sub", "--instances", "2", *ADD_SUB) as server:
        counts = deadline_storm(server.grpc_url, "add_sub", seconds=6)
        assert counts["deadline"] > 0, counts
        _assert_ordinary_calls_succeed(server.grpc_url)
        wait_until(lambda: pending_requests(server) == 0, "no request pending", 10)


def rapid_reset(port: int, model: str, streams: int, batch: int = 100, delay: float = 0.0) -> int:
    """HTTP/2 "rapid reset": open a ModelInfer call (HEADERS + DATA) and cancel it at once (RST_STREAM), `streams`
    times, over as many connections as the server allows; returns how many calls were opened."""
    import socket

    import hpack
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[16])
        del tensor
        request.raw_input_contents.append(np.arange(16, dtype=np.int32).tobytes())
    body = request.SerializeToString()
    message = b"\x00" + len(body).to_bytes(4, "big") + body
    headers = [(":method", "POST"), (":scheme", "http"), (":path", "/inference.GRPCInferenceService/ModelInfer"),
               (":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc"), ("te", "trailers")]
    opened = 0
    while opened < streams:
        sock = socket.create_connection(("127.0.0.1", port))
        stop = threading.Event()

        def drain(sock=sock, stop=stop) -> None:
            try:
                while not stop.is_set() and sock.recv(65536):
                    pass
            except OSError:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        encoder = hpack.Encoder()
        try:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
            stream_id = 1
            while opened < streams and stream_id < 2**31 - 1:
                ids = range(stream_id, stream_id + 2 * batch, 2)
                sock.sendall(b"".join(frame(1, 0x4, sid, encoder.encode(headers)) + frame(0, 0x1, sid, message)
                                      for sid in ids))
                if delay:  # resets that land while the calls are queued, running, or being answered
                    time.sleep(delay * (opened // batch % 4) / 3)
                sock.sendall(b"".join(frame(3, 0, sid, (8).to_bytes(4, "big")) for sid in ids))
                opened += batch
                stream_id += 2 * batch
        except OSError:
            pass  # the server closed the connection (GOAWAY): open another
        finally:
            stop.set()
            sock.close()
            reader.join(5)
    return opened


def test_rapid_reset_leaves_the_model_working():
    with serve("examples.add_sub:add_sub", "--instances", "2", *ADD_SUB) as server:
        rapid_reset(server.port, "add_sub", streams=10_000)  # HEADERS, DATA, RST_STREAM back to back
        rapid_reset(server.port, "add_sub", streams=10_000, batch=20, delay=0.003)  # resets racing the answers
        _assert_ordinary_calls_succeed(server.grpc_url)
        wait_until(lambda: pending_requests(server) == 0, "no request pending", 10)


def http_hangups(port: int, model: str, seconds: float, threads: int = 8) -> int:
    """Clients that send an HTTP infer request and close the connection 0-2 ms later, for `seconds`."""
    import json
    import socket

    header = json.dumps({"inputs": [
        {"name": n, "datatype": "INT32", "shape": [16], "parameters": {"binary_data_size": 64}}
        for n in ("INPUT0", "INPUT1")]}).encode()
    body = header + np.arange(16, dtype=np.int32).tobytes() * 2
    head = (f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    stop = time.monotonic() + seconds
    sent = [0] * threads

    def run(index: int) -> None:
        n = 0
        while time.monotonic() < stop:
            n += 1
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(head + body)
                time.sleep((n % 5) * 0.0005)
            sent[index] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(sent)


def test_http_clients_that_hang_up_leave_the_model_working():
    import tritonclient.http as httpclient

    with serve("examples.add_sub:add_sub", "--instances", "2", *ADD_SUB) as server:
        port = int(server.http_url.rsplit(":", 1)[1])
        assert http_hangups(port, "add_sub", seconds=5) > 100
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(50):
            inputs = []
            for name in ("INPUT0", "INPUT1"):
                tensor = httpclient.InferInput(name, [16], "INT32")
                tensor.set_data_from_numpy(np.arange(16, dtype=np.int32))
                inputs.append(tensor)
            assert (client.infer("add_sub", inputs).as_numpy("OUTPUT0") == 2 * np.arange(16)).all()
        client.close()
        wait_until(lambda: pending_requests(server) == 0, "no request pending", 10)
