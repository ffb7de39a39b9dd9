"""Memory-bound checks of the HTTP/1.1 port (slow): each abuse of issue 13 items 2 and 4 against a real server,
asserting that the server's resident memory grows by less than a stated bound, and that it serves afterwards.

The figures (before the limits existed → now) are in docs/security.md, "HTTP/1.1: the HTTP and metrics ports".
"""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._support.http_raw import TIMEOUT_S
from tests._support.rss import rss_bytes
from tests._support.serving import serve
from tests.abuse._http import (
    ADD_SUB,
    INFER_PATH,
    check_serves,
    connect,
    error_message,
    peak_rss_while,
    raise_fd_limit,
    read_response,
)

pytestmark = pytest.mark.slow

MiB = 1024 * 1024


@pytest.fixture
def server():
    """A server of its own per test: what one abuse leaves in the heap does not blur the next one's figure."""
    with serve("tests.models:add_sub", *ADD_SUB) as running:
        check_serves(running.http_url)  # warm: the first request's allocations are not the abuse's
        yield running


def _report(name: str, before: int, peak: int, after: int) -> None:
    print(f"\n{name}: server RSS {before / MiB:.1f} MiB, peak +{(peak - before) / MiB:.1f} MiB, "
          f"after +{(after - before) / MiB:.1f} MiB")


def _attack_in_threads(pid: int, attack: Callable[[], None], count: int) -> tuple[int, int, int]:
    """Run `attack` on `count` threads at once; the server's RSS before, at its peak meanwhile, and after."""
    before = rss_bytes(pid)
    threads = [threading.Thread(target=attack) for _ in range(count)]
    for thread in threads:
        thread.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.02)
    return before, peak, rss_bytes(pid)


def test_declared_content_length_allocates_nothing(server):
    """40 connections declare a 64 MiB body and send 1 KiB of it: the buffers grow with what arrived."""
    pid = server.process.pid
    before = rss_bytes(pid)
    head = (f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {64 * MiB}\r\n"
            "Inference-Header-Content-Length: 100\r\n\r\n").encode()
    socks = [connect(server.http_url) for _ in range(40)]
    try:
        for sock in socks:
            sock.sendall(head + b" " * 1024)
        peak = peak_rss_while(pid, 3.0, rss_bytes)
    finally:
        for sock in socks:
            sock.close()
    after = rss_bytes(pid)
    _report("40 x Content-Length 64 MiB", before, peak, after)
    assert peak - before < 32 * MiB
    check_serves(server.http_url)


def _gzip_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MiB)
    parts = [compressor.compress(zeros) for _ in range(size // MiB)]
    parts.append(compressor.flush())
    return b"".join(parts)


def test_compressed_body_decompresses_within_the_limit(server):
    """A 1 MiB gzip body that inflates to 1 GiB, on 4 connections at once: 413 for each, bounded memory."""
    bomb = _gzip_bomb(1024 * MiB)
    assert len(bomb) < 2 * MiB
    request = (f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
               f"Content-Length: {len(bomb)}\r\n\r\n").encode() + bomb
    answers: list[tuple[int, str]] = []

    def attack() -> None:
        with connect(server.http_url) as sock:
            sock.sendall(request)
            status, headers, body = read_response(sock)
            answers.append((status, error_message(headers, body)))

    before, peak, after = _attack_in_threads(server.process.pid, attack, 4)
    _report("4 x gzip 1 MiB -> 1 GiB", before, peak, after)
    assert len(answers) == 4
    for status, message in answers:
        assert status == 413, message
        assert "64 MiB" in message or str(64 * MiB) in message
        assert "--http-max-input-size" in message
    assert peak - before < 96 * MiB  # the 64 MiB limit, one inflate step, allocator slack
    check_serves(server.http_url)


def test_huge_header_is_refused(server):
    """A 16 MiB header on 4 connections at once: 431, and memory bounded by the header limit."""
    answers: list[int] = []

    def attack() -> None:
        with connect(server.http_url) as sock:
            try:
                sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (16 * MiB) + b"\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server answered and closed before taking the rest
            answers.append(read_response(sock)[0])

    before, peak, after = _attack_in_threads(server.process.pid, attack, 4)
    _report("4 x 16 MiB header", before, peak, after)
    assert answers == [431] * 4
    assert peak - before < 16 * MiB
    check_serves(server.http_url)


def test_slowloris_connections_are_bounded_and_cut():
    """1,000 connections each send 60 KiB of a head that never ends: the server holds what arrived (under the
    64 KiB head limit each), answers each 408 at the header timeout, and closes them."""
    count, sent = 1000, 60 * 1024
    raise_fd_limit(count + 256)
    with serve("tests.models:add_sub", *ADD_SUB, "--http-header-timeout", "3") as running:
        check_serves(running.http_url)
        pid = running.process.pid
        before = rss_bytes(pid)
        partial = b"GET /v2/health/ready HTTP/1.1\r\nX-Slow: " + b"s" * (sent - 40)
        socks = [connect(running.http_url) for _ in range(count)]
        try:
            for sock in socks:
                sock.sendall(partial)
            held = peak_rss_while(pid, 1.0, rss_bytes)
            statuses = [read_response(sock)[0] for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        _report(f"{count} slowloris heads of 60 KiB", before, held, rss_bytes(pid))
        assert statuses == [408] * count
        assert held - before < count * (sent + 8 * 1024)
        check_serves(running.http_url)


def test_idle_connections_hold_no_buffers(server):
    """10,000 keep-alive connections, each after one request: the server holds no read buffer for them."""
    count = 10_000
    raise_fd_limit(count + 256)
    pid = server.process.pid
    before = rss_bytes(pid)
    request = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = connect(server.http_url)
            socks.append(sock)
            sock.sendall(request)
            assert read_response(sock)[0] == 200
        time.sleep(1.0)
        held = rss_bytes(pid)
    finally:
        for sock in socks:
            sock.close()
    time.sleep(1.0)
    after = rss_bytes(pid)
    per_connection = (held - before) / count
    print(f"\n{count} idle connections: server RSS {before / MiB:.1f} MiB, held +{(held - before) / MiB:.1f} MiB "
          f"({per_connection / 1024:.1f} KiB each), after closing +{(after - before) / MiB:.1f} MiB")
    assert per_connection < 8 * 1024
    check_serves(server.http_url)


def test_unread_responses_are_bounded(server):
    """A client pipelines 200,000 requests and never reads an answer: the server stops reading instead of
    queueing answers without end."""
    pid = server.process.pid
    before = rss_bytes(pid)
    request = b"GET /v2/models/add_sub/config HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(server.http_url, timeout_s=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sent = 0
        try:
            for _ in range(200_000):
                sock.sendall(request)
                sent += 1
        except TimeoutError:
            pass  # the server stopped reading: what the test wants
        peak = peak_rss_while(pid, 2.0, rss_bytes)
    after = rss_bytes(pid)
    _report(f"{sent} pipelined requests, no answer read", before, peak, after)
    assert peak - before < 32 * MiB
    check_serves(server.http_url)


IDENTITY = ["--input", "IN_X:fp32:-1", "--output", "OUT_X:fp32:-1", "--instances", "2"]


def identity_request(floats: int) -> bytes:
    """A Triton binary-tensor infer request for `tests.models:identity` with `floats` FP32 values."""
    header = json.dumps({"inputs": [{"name": "IN_X", "shape": [floats], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * floats}}]}).encode()
    head = (f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: "
            f"{len(header)}\r\nContent-Length: {len(header) + 4 * floats}\r\n\r\n").encode()
    return head + header + np.arange(floats, dtype=np.float32).tobytes()


def hang_up_storm(url: str, threads: int = 4, per_thread: int = 300, body_bytes: int = MiB) -> None:
    """`threads` clients, each `per_thread` times: open a connection, send a `body_bytes` infer request (every
    other time only half of its body), close at once without reading the answer. The bytes wait in the kernel
    while the server is busy: it finds hundreds of connections, each with a body to read before their end."""
    request = identity_request(body_bytes // 4)
    half = request[: len(request) - body_bytes // 2]

    def attack() -> None:
        for i in range(per_thread):
            with connect(url, timeout_s=120) as sock:  # a stalled upload waits while memory is short
                sock.sendall(half if i % 2 else request)

    workers = [threading.Thread(target=attack) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def check_identity_serves(url: str, floats: int) -> None:
    """An ordinary tritonclient.http request of `floats` FP32 values is answered correctly."""
    x = np.arange(floats, dtype=np.float32)
    tensor = httpclient.InferInput("IN_X", [floats], "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S) as client:
        assert client.is_server_ready()
        result = client.infer("identity", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUT_X"), x)


@pytest.mark.parametrize("budget_mib", [64, 256])
def test_hang_up_storm_is_bounded_by_the_buffered_bytes_budget(budget_mib):
    """4 threads x 300 connections that send a 1 MiB request (or half of it) and close: the server reads bodies
    within `--http-max-buffered-bytes` (256 MiB: the default) instead of one for every connection it accepted, and
    serves ordinary requests afterwards. Before the budget the server peaked at +955 MiB (the clients are done in
    a fraction of a second: their bytes wait in the kernel, and the server reads them over the next seconds)."""
    budget = budget_mib * MiB
    with serve("tests.models:identity", *IDENTITY, "--http-max-buffered-bytes", str(budget)) as running:
        url = running.http_url
        for floats in (16, MiB // 4):  # warm: the first large request's allocations are not the storm's
            check_identity_serves(url, floats)
        pid = running.process.pid
        before = rss_bytes(pid)
        storm = threading.Thread(target=hang_up_storm, args=(url,))
        storm.start()
        peak = before
        while storm.is_alive():
            peak = max(peak, rss_bytes(pid))
            time.sleep(0.02)
        storm.join()
        peak = max(peak, peak_rss_while(pid, 5.0, rss_bytes))  # the server reads what the kernel holds
        _report(f"hang-up storm, budget {budget_mib} MiB", before, peak, rss_bytes(pid))
        # The budget (one 1 MiB body may pass it), plus what is not a body: ~1,200 connections' objects and their
        # 4 KiB reads, the answers' shared-memory pages the server touches (~15 MiB), allocator slack (measured: the
        # budget + 28-32 MiB).
        assert peak - before < budget + 64 * MiB
        for floats in (16, MiB // 4, 4 * MiB):
            check_identity_serves(url, floats)
