"""Every HTTP/1.1 limit against a real server, through raw sockets: the status a client gets past it (431, 408, 413,
a closed connection), and that the server stays up and ordinary tritonclient.http requests succeed afterwards.

The server runs with small limits so that each abuse takes a second, not a minute.
"""

from __future__ import annotations

import gzip
import os
import socket
import threading
import time
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._support.serving import serve
from tests._support.sockets import ESTABLISHED, established_to, peer_state, peer_unread, unread_bytes, unsent_bytes
from tests._support.waits import wait_until
from tests.abuse._http import (
    ADD_SUB,
    INFER_PATH,
    check_serves,
    closed_by_server,
    connect,
    error_message,
    read_response,
)

MAX_HEAD = 4096
MAX_FIELDS = 20
MAX_INPUT = 200_000
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
IDLE_TIMEOUT = 1.0
LIMITS = [
    "--http-max-header-size", str(MAX_HEAD), "--http-max-header-count", str(MAX_FIELDS),
    "--http-max-input-size", str(MAX_INPUT), "--http-header-timeout", str(HEADER_TIMEOUT),
    "--http-body-timeout", str(BODY_TIMEOUT), "--http-idle-timeout", str(IDLE_TIMEOUT),
]
# A deadline is kept to within a quarter of the timeout; allow for a loaded machine.
LATE_S = 10.0


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:add_sub", *ADD_SUB, *LIMITS) as running:
        yield running
    assert "Traceback" not in running.log, running.log


@pytest.fixture(scope="module")
def metrics_url(server):
    return server.metrics_url.removeprefix("http://").split("/")[0]


def _head(fields: int = 1, pad_to: int | None = None, path: str = "/v2/health/ready") -> bytes:
    """A GET head with `fields` header fields (Host first), padded with one more field to exactly `pad_to` bytes."""
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"X-F{i}: v\r\n" for i in range(fields - 1))
    if pad_to is not None:
        filler = pad_to - len(head) - len("X-Pad: \r\n\r\n")
        assert filler >= 0
        head += "X-Pad: " + "p" * filler + "\r\n"
    return (head + "\r\n").encode()


def _exchange(url: str, data: bytes) -> tuple[int, dict[str, str], bytes, socket.socket]:
    sock = connect(url)
    sock.sendall(data)
    status, headers, body = read_response(sock)
    return status, headers, body, sock


# ---- head size and field count: 431 ---------------------------------------------------------------------------

HEAD_TOO_LARGE = (f"request header fields too large: the request line and headers exceed {MAX_HEAD} bytes. "
                  "Use --http-max-header-size to increase the limit.")
TOO_MANY_FIELDS = (f"request header fields too large: more than {MAX_FIELDS} header fields. "
                   "Use --http-max-header-count to increase the limit.")


@pytest.mark.parametrize("head, refusal", [
    (_head(fields=2, pad_to=MAX_HEAD), None),  # exactly the limits
    (_head(fields=MAX_FIELDS), None),
    (_head(fields=2, pad_to=MAX_HEAD + 1), HEAD_TOO_LARGE),  # one byte, one field past them
    (_head(fields=MAX_FIELDS + 1), TOO_MANY_FIELDS),
], ids=["max-size", "max-fields", "size+1", "fields+1"])
def test_head_limits_are_exact(server, head, refusal):
    status, headers, body, sock = _exchange(server.http_url, head)
    with sock:
        if refusal is None:
            assert status == 200, body
        else:
            assert (status, error_message(headers, body)) == (431, refusal)
            assert headers["connection"] == "close"
            assert closed_by_server(sock)
    check_serves(server.http_url)


@pytest.mark.parametrize("pieces", [1, 7, 1000])
def test_endless_head_is_refused_before_it_ends(server, pieces):
    """A 1 MiB header field that never ends, in one write or many: 431 once the limit is passed."""
    with connect(server.http_url) as sock:
        data = b"GET /v2/health/ready HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20)
        step = -(-len(data) // pieces)
        try:
            for start in range(0, len(data), step):
                sock.sendall(data[start : start + step])
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the rest was taken
        status, headers, body = read_response(sock)
        assert status == 431 and "exceed 4096 bytes" in error_message(headers, body)
    check_serves(server.http_url)


def test_head_split_at_every_byte_of_its_end(server):
    """The end of a head may arrive split anywhere: a head of exactly the limit is still accepted."""
    head = _head(fields=2, pad_to=MAX_HEAD)
    for cut in range(len(head) - 5, len(head)):
        with connect(server.http_url) as sock:
            sock.sendall(head[:cut])
            # the server reads the first piece on its own before the rest comes (else they may be read together)
            wait_until(lambda: unsent_bytes(sock) == 0 and peer_unread(sock) == 0, "the server to read the first piece")
            sock.sendall(head[cut:])
            assert read_response(sock)[0] == 200


def test_repeated_header_name_flood(server):
    """80,000 lines of one header name (quadratic to join before): refused at the field count, at once."""
    head = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n" + b"X-Same: abc\r\n" * 80_000 + b"\r\n"
    with connect(server.http_url) as sock:
        try:
            sock.sendall(head)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert read_response(sock)[0] == 431
    check_serves(server.http_url)


def test_pipelined_requests_after_a_refused_head_are_not_read(server):
    """A refused head ends the connection: requests pipelined behind it get no answer, those before do."""
    wire = _head() + _head(fields=MAX_FIELDS + 1) + _head()
    with connect(server.http_url) as sock:
        sock.sendall(wire)
        buffer = bytearray()
        assert read_response(sock, buffer)[0] == 200
        assert read_response(sock, buffer)[0] == 431
        assert not buffer and closed_by_server(sock)


# ---- timeouts: 408, closed connections -------------------------------------------------------------------------

def test_slowloris_head_gets_408(server):
    """A head that trickles in (a byte every 0.2 s) is cut off by the header timeout however steady the trickle."""
    started = time.monotonic()
    with connect(server.http_url) as sock:
        sock.settimeout(0.2)
        answer = b""
        for byte in b"GET /v2/health/ready HTTP/1.1\r\nX-Slow: " + b"s" * 1000:
            try:
                sock.sendall(bytes([byte]))
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if answer or time.monotonic() - started > LATE_S:
                break
        assert answer, "no answer to a head that never ends"
        sock.settimeout(LATE_S)
        status, headers, body = read_response(sock, bytearray(answer))
    assert status == 408
    assert error_message(headers, body) == (
        f"request header not received within {HEADER_TIMEOUT:g} s. Use --http-header-timeout to increase the limit.")
    assert HEADER_TIMEOUT <= time.monotonic() - started < LATE_S
    check_serves(server.http_url)


@pytest.mark.parametrize("length", [1000, 150_000])  # parsed body, and one received straight into its buffer
def test_stalled_body_gets_408(server, length):
    head = (f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n").encode()
    with connect(server.http_url) as sock:
        sock.sendall(head + b" " * 100)
        started = time.monotonic()
        status, headers, body = read_response(sock)
        waited = time.monotonic() - started
        assert status == 408
        assert error_message(headers, body) == (
            f"request body: no data received for {BODY_TIMEOUT:g} s. Use --http-body-timeout to increase the limit.")
        assert closed_by_server(sock)
    assert BODY_TIMEOUT * 0.9 <= waited < LATE_S
    check_serves(server.http_url)


def test_slow_but_moving_body_is_not_cut(server):
    """The body timeout is about stalls: a body that keeps arriving, slower than the timeout overall, is fine."""
    a, b = np.ones((1, 16), dtype=np.int32), np.full((1, 16), 2, dtype=np.int32)
    header = (b'{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},'
              b'{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}]}')
    body = header + a.tobytes() + b.tobytes()
    with connect(server.http_url) as sock:
        sock.sendall(f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                     f"Inference-Header-Content-Length: {len(header)}\r\n\r\n".encode())
        step = len(body) // 6
        for start in range(0, len(body), step):  # ~2.5 s in all, never 1 s without a byte
            time.sleep(0.4)  # (the pace is what is tested: slower than the body timeout overall, not stalled)
            sock.sendall(body[start : start + step])
        status, _headers, data = read_response(sock)
    assert status == 200, data


def test_idle_connection_is_closed(server):
    """A keep-alive connection with no request under way is closed, without an answer, after the idle timeout."""
    for first in (b"", _head()):
        with connect(server.http_url) as sock:
            started = time.monotonic()
            if first:
                sock.sendall(first)
                assert read_response(sock)[0] == 200
            assert closed_by_server(sock, LATE_S)
            assert IDLE_TIMEOUT * 0.9 <= time.monotonic() - started < LATE_S


def test_tritonclient_reconnects_after_idle_close(server):
    """tritonclient.http keeps its connection between calls: one closed by the idle timeout is replaced, so the
    next inference succeeds."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [1, 16], "INT32")
        tensor.set_data_from_numpy(a)
        inputs.append(tensor)
    with httpclient.InferenceServerClient(server.http_url) as client:
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + a)
        port = int(server.http_url.rsplit(":", 1)[1])
        kept = established_to(port)
        assert kept, "the client did not keep its connection"
        started = time.monotonic()
        # The idle timeout must pass (that is what is tested), but the test waits for the server's close itself,
        # within a bound, rather than assuming it at a guessed time: the next call never meets a closing connection.
        wait_until(lambda: not kept & established_to(port), "the server closes the idle connection", LATE_S)
        assert time.monotonic() - started >= IDLE_TIMEOUT * 0.75
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + a)


def _flood_unread(url: str, requests: int) -> socket.socket:
    """A socket that has pipelined up to `requests` config requests without reading an answer, until the server
    stopped reading."""
    batch = b"GET /v2/models/add_sub/config HTTP/1.1\r\nHost: x\r\n\r\n" * 1000
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = url.rsplit(":", 1)
    sock.connect((host, int(port)))
    sock.settimeout(0.5)
    try:
        for _ in range(requests // 1000):
            sock.sendall(batch)
    except (TimeoutError, ConnectionResetError, BrokenPipeError):
        return sock  # the server stopped reading (and may have dropped the connection already)
    sock.close()
    pytest.fail(f"the server read {requests} requests whose answers were not taken")


def test_client_that_does_not_take_its_answers_is_dropped(server):
    """Pipelined requests, answers never read: the server stops reading, then drops the connection once the
    answers have made no progress for the body timeout."""
    with _flood_unread(server.http_url, 1_000_000) as sock:
        # The stall must last a body timeout (that is what is tested): nothing is read meanwhile, and the test waits
        # for the server's close (its end of the connection leaves ESTABLISHED), within a bound, rather than for a
        # guessed time.
        wait_until(lambda: peer_state(sock) != ESTABLISHED, "the server drops the connection",
                   BODY_TIMEOUT * 2 + LATE_S)
        sock.settimeout(LATE_S)
        try:
            while sock.recv(1 << 20):  # what the kernel buffers held, then the end
                pass
        except ConnectionResetError:
            pass
    check_serves(server.http_url)


def test_answers_wait_for_a_slow_reader_and_all_arrive(server):
    """Pipelined requests read late, but read: every answer arrives, in order, none dropped."""
    count = 20_000
    wire = b"".join(f"GET /v2/models/add_sub/config?i={i} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for i in range(count))
    with connect(server.http_url) as sock:
        sender = threading.Thread(target=sock.sendall, args=(wire,))
        sender.start()
        # The server stops reading meanwhile: answers wait unread here, and requests it has not taken wait in this
        # socket's send queue; then the answers are taken.
        wait_until(lambda: unread_bytes(sock) > 0 and unsent_bytes(sock) > 0, "the server stops reading")
        buffer = bytearray()
        for i in range(count):
            status, _headers, body = read_response(sock, buffer)
            assert status == 200 and b'"add_sub"' in body, (i, body)
        sender.join(LATE_S)
        assert not buffer


# ---- bodies: 413 -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_body_past_the_input_limit_gets_413(server, encoding):
    inflated = b" " * (MAX_INPUT * 50)
    body = gzip.compress(inflated) if encoding == "gzip" else zlib.compress(inflated)
    assert len(body) < MAX_INPUT
    status, headers, data, sock = _exchange(server.http_url, (
        f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Encoding: {encoding}\r\nContent-Length: {len(body)}\r\n"
        "\r\n").encode() + body)
    sock.close()
    assert status == 413
    assert error_message(headers, data) == (
        f"request size of more than {MAX_INPUT} bytes after {encoding} decompression exceeds the maximum allowed "
        f"input size of {MAX_INPUT} bytes. Use --http-max-input-size to increase the limit.")
    check_serves(server.http_url)


def test_truncated_compressed_body_is_400(server):
    body = gzip.compress(b'{"inputs": []}' * 100)[:-10]
    status, headers, data, sock = _exchange(server.http_url, (
        f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: {len(body)}\r\n"
        "\r\n").encode() + body)
    sock.close()
    assert status == 400
    assert "incomplete" in error_message(headers, data)


def test_declared_body_past_the_input_limit_gets_413(server):
    with connect(server.http_url) as sock:
        sock.sendall(f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_INPUT + 1}\r\n\r\n".encode()
                     + b" " * (MAX_INPUT + 1))
        status, headers, body = read_response(sock)
    assert status == 413 and f"maximum allowed input size of {MAX_INPUT} bytes" in error_message(headers, body)
    check_serves(server.http_url)


def _server_holds(ends: tuple[int, int], pid: int) -> bool:
    """Whether process `pid` holds an open file for the server's end of a loopback connection (`ends`: the client's
    port, the server's): that end's socket inode, from /proc/net/tcp, among the process's open files."""
    ours, theirs = ends
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as table:
            next(table)
            for line in table:
                fields = line.split()
                if (int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)) == (theirs, ours):
                    inodes.add(f"socket:[{fields[9]}]")
    inodes.discard("socket:[0]")  # (an end no process holds)
    if not inodes:
        return False
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except FileNotFoundError:
            pass
    return False


def _send_until_stopped(sock: socket.socket, piece: bytes, stop: threading.Event) -> None:
    """Send `piece` over and over (an endless body) until `stop` is set or the server no longer takes it."""
    deadline = time.monotonic() + LATE_S
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            sock.sendall(piece)
    except OSError:
        pass  # the server reset the connection after its answer: what it owes the client is already sent


@pytest.mark.parametrize("framing", ["chunked", "declared"])
def test_an_endless_body_past_the_input_limit_gets_413_at_once_and_the_connection_closes(server, framing):
    """A body that never ends (chunks without the last one, or a Content-Length of a terabyte) and keeps coming: the
    413 comes once the limit is passed, not at the body's end, with `Connection: close`, and the server then ends the
    connection (the client reads the end) while the client is still sending; the connection leaves nothing behind."""
    pid = server.process.pid
    piece = b" " * 16384
    if framing == "chunked":
        head = f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        size = f"more than {MAX_INPUT}"
    else:
        head = f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {10**12}\r\n\r\n"
        size = str(10**12)
    stop = threading.Event()
    with connect(server.http_url) as sock:
        sock.sendall(head.encode())
        ends = (sock.getsockname()[1], sock.getpeername()[1])
        wait_until(lambda: _server_holds(ends, pid), "the server holds the connection")
        sender = threading.Thread(target=_send_until_stopped, args=(sock, piece, stop))
        sender.start()
        try:
            buffer = bytearray()
            status, headers, body = read_response(sock, buffer)
            assert (status, headers.get("connection")) == (413, "close")
            assert error_message(headers, body) == (
                f"request size of {size} bytes exceeds the maximum allowed input size of {MAX_INPUT} bytes. "
                "Use --http-max-input-size to increase the limit.")
            sock.settimeout(LATE_S)
            assert not buffer and sock.recv(1) == b""  # the end (not a reset), while the client still sends
        finally:
            stop.set()
            sender.join(LATE_S)
        sock.close()
        wait_until(lambda: not _server_holds(ends, pid), "the server lets go of the connection", LATE_S)
    check_serves(server.http_url)


def test_a_request_line_without_a_version_is_refused_and_closed(server):
    """HTTP/0.9 (no version on the request line) is refused with 400 and the connection closed, not answered as an
    HTTP/1.1 request."""
    with connect(server.http_url) as sock:
        sock.sendall(b"GET /v2/health/ready\r\n\r\n")
        buffer = bytearray()
        status, headers, body = read_response(sock, buffer)
        assert (status, headers.get("connection")) == (400, "close")
        assert error_message(headers, body) == ("malformed HTTP request: the request line has no HTTP version "
                                                "(HTTP/0.9 is not supported)")
        sock.settimeout(LATE_S)
        assert not buffer and sock.recv(1) == b""
    check_serves(server.http_url)


# ---- the metrics port has the same protection ------------------------------------------------------------------

def test_metrics_port_limits(server, metrics_url):
    status, headers, body, sock = _exchange(metrics_url, _head(fields=2, pad_to=MAX_HEAD + 1, path="/metrics"))
    sock.close()
    assert status == 431
    status, headers, body, sock = _exchange(metrics_url, _head(fields=MAX_FIELDS + 1, path="/metrics"))
    sock.close()
    assert status == 431
    with connect(metrics_url) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        status, headers, body = read_response(sock)
        assert status == 408
    with connect(metrics_url) as sock:
        sock.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n" + b" " * 70000)
        status, headers, body = read_response(sock)
        assert status == 413 and "maximum allowed input size of 65536 bytes" in error_message(headers, body)
    status, _headers, body, sock = _exchange(metrics_url, _head(path="/metrics"))
    sock.close()
    assert status == 200 and b"nv_inference_request_success" in body
    check_serves(server.http_url)
