"""Each abuse of issue 13 against the HTTP/2 transport, with raw frames: what the client gets (GOAWAY, RST_STREAM,
a gRPC status, and their codes) and that what the server holds stays bounded. The transport runs alone in this
process (tests/frontend/grpc/inproc.py), with small limits where that makes a test quick; the end-to-end checks
through tritonclient and the CLI options are at the end, the memory measurements in tests/abuse."""

from __future__ import annotations

import gzip
import os
import socket
import struct
import time

import grpc
import hpack
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton.frontend.h2.call import GROW_MIN
from pytriton.frontend.h2.connection import READ_BUFFER, H2Limits
from tests._support import waits
from tests._support.serving import serve, tensor_args
from tests._support.sockets import established_to
from tests.frontend.grpc.inproc import InProcessServer, connection, echo_works, request, wait_until
from tests.frontend.grpc.raw_h2 import (
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    NO_ERROR,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    RST_STREAM,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_CONCURRENT_STREAMS,
    S_MAX_HEADER_LIST_SIZE,
    WINDOW_UPDATE,
    RawH2,
    frame,
    grpc_message,
    ping,
    rst_stream,
    settings,
    window_update,
)

def status(trailers: dict[str, str]) -> grpc.StatusCode:
    return next(code for code in grpc.StatusCode if str(code.value[0]) == trailers["grpc-status"])


# ---- header lists ---------------------------------------------------------------------------------------------------


def test_header_list_limit_on_every_hpack_path():
    """A header list larger than SETTINGS_MAX_HEADER_LIST_SIZE (name + value + 32 per field) ends the call with
    RESOURCE_EXHAUSTED, whether the block is all one-byte references to the static table (the fast path that
    skipped the limit, issue 13) or refers to a large entry it inserted into the dynamic table; the connection goes
    on (its HPACK state intact). Past twice the limit (grpc's hard limit), decoding stops: GOAWAY."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        limit = raw.server_settings[S_MAX_HEADER_LIST_SIZE]
        assert limit == 16 * 1024
        # 500 references to ":method: GET" (42 bytes each counted): a 500-byte block, a 21000-byte list
        raw.headers(1, bytes([0x82]) * 500)
        _, _, trailers = raw.answer(1)
        assert status(trailers) == grpc.StatusCode.RESOURCE_EXHAUSTED and str(limit) in trailers["grpc-message"]
        # a 4000-byte value inserted into the dynamic table (index 62), then referred to 5 times: 24222 bytes
        block = hpack.Encoder().encode([("x-big", "v" * 4000)], huffman=False) + b"\xbe" * 5
        assert block[0] == 0x40  # a literal with incremental indexing
        raw.headers(3, block)
        _, _, trailers = raw.answer(3)
        assert status(trailers) == grpc.StatusCode.RESOURCE_EXHAUSTED
        echo_works(raw, 5)
    for block in (bytes([0x82]) * 1000, hpack.Encoder().encode([("x-big", "v" * 4000)]) + b"\xbe" * 10):
        with InProcessServer() as server, RawH2(server.port) as raw:
            raw.handshake()
            raw.headers(1, block)
            item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
            assert b"header list larger than 32768" in item.payload


@pytest.mark.parametrize("block, reason", [
    (b"\xff" * 12, "bad header block: Variable integer representation is too long"),
    (b"\xff\xff", "bad header block: Unable to decode HPACK integer representation"),
    (b"\xbe", "bad header block: Invalid table index 62"),
])
def test_a_header_block_hpack_cannot_decode_gets_goaway_saying_why(block, reason):
    """Found by fuzzing (tests/fuzz, harness h2): the GOAWAY's debug data quoted the hpack package's message, which
    shows the block as a memoryview's repr: `<memory at 0x7f...>`, an address of the server's heap, different each
    time. It says what is wrong, and nothing of the server's memory."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        raw.headers(1, block)
        item = raw.expect_connection_error(COMPRESSION_ERROR)
        assert item.payload[8:].decode() == reason


@pytest.mark.parametrize("pieces", [1, 40])
def test_header_block_larger_than_the_limit_closes_the_connection(pieces):
    """256 KiB of one-byte references (issue 13: +1 GB RSS before): in one HEADERS frame it is refused on its
    9-byte header (FRAME_SIZE_ERROR), in CONTINUATION frames once the block passes the limit (ENHANCE_YOUR_CALM)."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        block = bytes([0x82]) * (256 << 10)
        if pieces == 1:
            raw.headers(1, block)
            raw.expect_connection_error(FRAME_SIZE_ERROR)
        else:
            step = len(block) // pieces
            raw.send(frame(HEADERS, END_STREAM, 1, block[:step]))
            try:
                for i in range(step, len(block), step):
                    last = i + step >= len(block)
                    raw.send(frame(CONTINUATION, END_HEADERS if last else 0, 1, block[i : i + step]))
            except OSError:
                pass
            raw.expect_connection_error(ENHANCE_YOUR_CALM)


# ---- buffers grow with the bytes received --------------------------------------------------------------------------


def test_declared_message_sizes_allocate_nothing():
    """50 streams each declaring a 60 MiB message and sending 5 bytes of it (issue 13: +2.2 GB before): each holds
    a buffer of what arrived, at most GROW_MIN; sending the rest completes them."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake((S_INITIAL_WINDOW_SIZE, 2**31 - 1))
        raw.send(window_update(0, 2**31 - 1 - 65535))
        size = 60 << 20
        for i in range(50):
            raw.headers(1 + 2 * i, request(raw, "/t.S/Echo"), end_stream=False)
            raw.data(1 + 2 * i, b"\x00" + size.to_bytes(4, "big") + b"12345", end_stream=False)
        raw.send(ping())
        raw.expect_ping_ack()
        conn = server.run(lambda: connection(server))
        held = server.run(lambda: [len(s.body) for s in conn.streams.values() if s.body is not None])
        assert len(held) == 50 and max(held) <= GROW_MIN, held
        # the first one's remaining bytes: its buffer grows as they arrive, and the call completes
        rest = b"x" * (size - 5)
        for pos in range(0, len(rest), 1 << 20):
            raw.data(1, rest[pos : pos + (1 << 20)], end_stream=pos + (1 << 20) >= len(rest))
        _, data, trailers = raw.answer(1)
        assert trailers["grpc-status"] == "0" and len(data) == size + 5 and data[5:10] == b"12345"


def test_frame_headers_do_not_grow_the_read_buffer():
    """A 9-byte header declaring a 16 MiB frame (issue 13: the read buffer grew to 16 MiB): an unknown frame type is
    skipped as its bytes arrive; a header-carrying frame that long is refused on its header."""
    with InProcessServer() as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            raw.send(struct.pack(">HBBBL", 0xFFFF, 0xFF, 0x42, 0, 0) + b"x" * 1_000_000)
            conn = server.run(lambda: connection(server))
            # The server has taken all the 1 MB sent so far: what is left to skip of the 16 MiB frame shows it.
            wait_until(server, lambda: conn._skip_left == 0xFFFFFF - 1_000_000, "the 1 MB skipped")
            assert server.run(lambda: len(conn._buf)) <= READ_BUFFER
        with RawH2(server.port) as raw:
            raw.handshake()
            raw.send(struct.pack(">HBBBL", 0xFFFF, 0xFF, HEADERS, END_HEADERS, 1))
            raw.expect_connection_error(FRAME_SIZE_ERROR)


def test_decompression_is_bounded_by_the_message_limit():
    """A gzip request that inflates past the message limit (issue 13: 1 MiB became 1-2 GiB) ends with
    RESOURCE_EXHAUSTED; what inflates within it is served."""
    limits = H2Limits(max_message_bytes=1 << 20)
    with InProcessServer(limits) as server, RawH2(server.port) as raw:
        raw.handshake()
        bomb = gzip.compress(bytes(64 << 20))  # 64 MiB of zeros in ~64 KiB
        raw.headers(1, request(raw, "/t.S/Echo", [("grpc-encoding", "gzip")]), end_stream=False)
        raw.data(1, b"\x01" + len(bomb).to_bytes(4, "big") + bomb)
        _, _, trailers = raw.answer(1)
        assert status(trailers) == grpc.StatusCode.RESOURCE_EXHAUSTED
        small = gzip.compress(b"y" * 1000)
        raw.headers(3, request(raw, "/t.S/Echo", [("grpc-encoding", "gzip")]), end_stream=False)
        raw.data(3, b"\x01" + len(small).to_bytes(4, "big") + small)
        _, data, trailers = raw.answer(3)
        assert trailers["grpc-status"] == "0" and data[5:] == b"y" * 1000


def test_declared_message_over_the_limit():
    limits = H2Limits(max_message_bytes=1000)
    with InProcessServer(limits) as server, RawH2(server.port) as raw:
        raw.handshake()
        raw.headers(1, request(raw, "/t.S/Echo"), end_stream=False)
        raw.data(1, b"\x00" + (1001).to_bytes(4, "big"), end_stream=False)
        _, _, trailers = raw.answer(1)
        assert status(trailers) == grpc.StatusCode.RESOURCE_EXHAUSTED and "1001 vs. 1000" in trailers["grpc-message"]
        raw.wait_for(lambda f: f.type == RST_STREAM and f.stream_id == 1 and f.code == NO_ERROR, "RST NO_ERROR")
        raw.data(1, b"x" * 1001)  # the rest, already on its way: ignored
        echo_works(raw, 3)


def test_flow_control_is_enforced():
    """DATA beyond the window we granted is a FLOW_CONTROL_ERROR."""
    limits = H2Limits(initial_window_size=65535)
    with InProcessServer(limits) as server, RawH2(server.port) as raw:
        raw.handshake()
        raw.headers(1, request(raw, "/t.S/Hold"), end_stream=False)
        raw.data(1, b"x" * 65536, end_stream=False)
        raw.expect_stream_error(1, FLOW_CONTROL_ERROR)


def test_a_client_streaming_call_gets_its_window_back_as_its_handler_takes_its_messages():
    """The window of a client-streaming call went back as its bytes arrived, so a client could send any number of
    messages while the handler took none. It goes back now for the messages the handler takes (padding and the
    message being received as they arrive): a client sending faster than that is held by flow control."""
    with InProcessServer(H2Limits(initial_window_size=65535)) as server, RawH2(server.port) as raw:
        raw.handshake()
        raw.headers(1, request(raw, "/t.S/Gate"), end_stream=False)
        message = grpc_message(b"m" * 995)  # 1,000 bytes with its prefix
        raw.send(frame(DATA, 0, 1, message * 60))  # 60,000 bytes: the handler takes one, the others wait
        raw.wait_for(lambda f: f.type == WINDOW_UPDATE and f.stream_id == 0, "the connection's window back")
        with pytest.raises(TimeoutError):
            raw.wait_for(lambda f: f.type == WINDOW_UPDATE and f.stream_id == 1, "no window back", timeout_s=0.5)
        server.run(server.ledger.gate.set)  # the handler takes the others: their window goes back
        update = raw.wait_for(lambda f: f.type == WINDOW_UPDATE and f.stream_id == 1, "the stream's window back")
        assert int.from_bytes(update.payload, "big") >= 65535 // 2
        for _ in range(60):  # as much again: beyond the first window
            raw.data(1, message, end_stream=False)
        raw.data(1, b"")
        _, data, trailers = raw.answer(1)
        assert trailers["grpc-status"] == "0" and data[5:] == str(120 * 995).encode()


def test_idle_connection_gives_back_its_buffers():
    """After a 1 MiB call a connection holds a 64 KiB read buffer and the 1 MiB message buffer (kept for the next
    message of that size); idle for buffer_release_s it holds neither, and serves the next call."""
    with InProcessServer(H2Limits(buffer_release_s=0.3)) as server, RawH2(server.port) as raw:
        raw.handshake((S_INITIAL_WINDOW_SIZE, 2**31 - 1))
        raw.send(window_update(0, 2**31 - 1 - 65535))
        raw.headers(1, request(raw, "/t.S/Echo"), end_stream=False)
        raw.data(1, grpc_message(b"m" * (1 << 20)))
        raw.answer(1)
        conn = server.run(lambda: connection(server))
        assert server.run(lambda: conn.calls.spare is not None)
        wait_until(server, lambda: not conn._buf and conn.calls.spare is None, "the buffers are released")
        echo_works(raw, 3)


# ---- streams and rates -----------------------------------------------------------------------------------------------


def test_concurrent_streams_past_the_limit_are_refused():
    with InProcessServer(H2Limits(max_concurrent_streams=4)) as server, RawH2(server.port) as raw:
        raw.handshake()
        assert raw.server_settings[S_MAX_CONCURRENT_STREAMS] == 4
        for i in range(5):
            raw.headers(1 + 2 * i, request(raw, "/t.S/Hold"), end_stream=False)
        item = raw.wait_for(lambda f: f.type in (RST_STREAM, GOAWAY), "RST_STREAM")
        assert item.type == RST_STREAM and item.stream_id == 9 and item.code == REFUSED_STREAM
        raw.send(rst_stream(1, 8))
        echo_works(raw, 11)  # a slot is free again


def test_rapid_reset_gets_goaway():
    """HEADERS + DATA + RST_STREAM in a loop (issue 13: ~50k resets/s, no GOAWAY): past max_resets_per_s the
    connection gets GOAWAY ENHANCE_YOUR_CALM; every call started was cancelled."""
    with InProcessServer(H2Limits(max_resets_per_s=200)) as server, RawH2(server.port) as raw:
        raw.handshake()
        block = request(raw, "/t.S/Hold")
        out = b"".join(
            frame(HEADERS, END_HEADERS, sid, block) + frame(DATA, END_STREAM, sid, grpc_message(b"x"))
            + rst_stream(sid, 8)
            for sid in range(1, 2 * 1000, 2)
        )
        try:
            raw.send(out)
        except OSError:
            pass
        item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
        assert b"RST_STREAM" in item.payload[8:]
        ledger = server.ledger
        wait_until(server, lambda: ledger.cancelled == ledger.started, "every call started is cancelled")
        assert server.run(lambda: ledger.started) <= 210


@pytest.mark.parametrize("flood, reason", [
    (ping(), b"PING"),
    (settings(), b"SETTINGS"),
    (frame(DATA, 0, 1), b"empty"),
    (frame(CONTINUATION, 0, 1), b"empty"),
    (frame(0x42, 0, 0), b"empty"),
])  # fmt: skip
def test_control_frame_floods_get_goaway(flood, reason):
    """PING, SETTINGS and frames that carry nothing (empty DATA without END_STREAM, empty CONTINUATION: issue 13
    accepted floods of them), past their rate: GOAWAY ENHANCE_YOUR_CALM."""
    limits = H2Limits(max_pings_per_s=50, max_settings_per_s=50, max_empty_frames_per_s=50,
                      max_ping_strikes=0)  # fmt: skip
    with InProcessServer(limits) as server, RawH2(server.port) as raw:
        raw.handshake()
        prefix = b""
        if flood[3] in (DATA, CONTINUATION):
            headers = request(raw, "/t.S/Hold")
            prefix = frame(HEADERS, 0 if flood[3] == CONTINUATION else END_HEADERS, 1, headers)
        try:
            raw.send(prefix + flood * 500)
        except OSError:
            pass
        item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
        assert reason in item.payload[8:]


def test_pings_without_answers_get_too_many_pings():
    """grpcio's ping policy: PINGs closer than 5 minutes with no HEADERS or DATA sent in between are strikes; the
    third strike gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings". A PING after we sent data starts afresh."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        for _ in range(3):
            raw.send(ping())
            raw.expect_ping_ack()
        echo_works(raw, 1)  # we sent HEADERS and DATA: the count starts again
        for _ in range(3):
            raw.send(ping())
            raw.expect_ping_ack()
        raw.send(ping())
        item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
        assert item.payload[8:] == b"too_many_pings"


def test_a_client_that_does_not_read_cannot_pile_up_answers():
    """A client that floods PINGs and never reads (issue 13: the answers grew without bound): once the socket is
    full, at most max_pending_control_frames answers are queued (17 bytes each; and those of the read that filled it),
    then the connection is closed."""
    limits = H2Limits(max_pings_per_s=10**6, max_ping_strikes=0, max_pending_control_frames=1000)
    with InProcessServer(limits) as server:
        raw = RawH2(server.port, rcvbuf=4096)
        raw.handshake()
        conn = server.run(lambda: connection(server))
        queued: list[int] = []

        def spy() -> None:  # the transport's buffer after each control frame written
            control = conn.outbox.control

            def counted(frame: bytes) -> None:
                control(frame)
                if conn.transport is not None:
                    queued.append(conn.transport.get_write_buffer_size())

            conn.outbox.control = counted

        server.run(spy)
        raw.sock.settimeout(0.5)
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                raw.sock.sendall(ping() * 1000)
        except OSError:  # the server closed the connection
            pass
        wait_until(server, lambda: not server.connections, "the connection is closed")
        raw.close()
        assert time.monotonic() < deadline
        # The answers written while the socket was full, plus those of the read that filled it (one read's answers
        # leave together at the end of the loop turn) and what was unsent of one.
        assert 0 < max(queued) <= 1001 * 17 + READ_BUFFER


def test_header_timeout():
    """A connection that sends nothing, or no request, or leaves a header block unfinished, gets GOAWAY and is
    closed after header_timeout_s (issue 13: slowloris-style connections were never closed)."""
    limits = H2Limits(header_timeout_s=0.3)
    with InProcessServer(limits) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(1 << 16)  # our SETTINGS
            while silent.recv(1 << 16):
                pass
            assert time.monotonic() - started < 5
        with RawH2(server.port) as raw:
            raw.handshake()
            assert raw.expect_connection_error(NO_ERROR)
        with RawH2(server.port) as raw:
            raw.handshake()
            echo_works(raw, 1)
            raw.headers(3, request(raw, "/t.S/Echo"), end_headers=False)
            raw.expect_connection_error(PROTOCOL_ERROR)


def test_idle_timeout():
    with InProcessServer(H2Limits(idle_timeout_s=0.5)) as server, RawH2(server.port) as raw:
        raw.handshake()
        echo_works(raw, 1)
        started = time.monotonic()
        item = raw.expect_connection_error(NO_ERROR)
        assert 0.3 < time.monotonic() - started < 10 and b"idle" in item.payload[8:]


# ---- end to end: the CLI options, through tritonclient ---------------------------------------------------------


@pytest.mark.skipif(os.environ.get("PYTRITON_GRPC_SERVER") == "grpcio", reason="tests our HTTP/2 transport")
def test_cli_limits_through_tritonclient():
    """--grpc-max-message-bytes, --grpc-max-header-list-size, --grpc-max-concurrent-streams and --grpc-idle-timeout
    reach the transport: tritonclient gets RESOURCE_EXHAUSTED past the first two, sees the third advertised, and
    carries on after an idle GOAWAY (it reconnects)."""
    args = ["--max-batch-size", "0", *tensor_args("input", [("IN_FP32", "fp32", "-1")]),
            *tensor_args("output", [("OUT_FP32", "fp32", "-1")]), "--grpc-max-message-bytes", "100000",
            "--grpc-max-header-list-size", "4096", "--grpc-max-concurrent-streams", "7", "--grpc-idle-timeout", "1"]
    with serve("tests.models:identity", *args) as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            assert raw.server_settings[S_MAX_CONCURRENT_STREAMS] == 7
            assert raw.server_settings[S_MAX_HEADER_LIST_SIZE] == 4096
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            x = grpcclient.InferInput("IN_FP32", [100], "FP32")
            x.set_data_from_numpy(np.ones(100, dtype=np.float32))
            assert client.infer("identity", [x]).as_numpy("OUT_FP32").sum() == 100
            big = grpcclient.InferInput("IN_FP32", [30000], "FP32")
            big.set_data_from_numpy(np.ones(30000, dtype=np.float32))
            with pytest.raises(InferenceServerException, match="larger than max"):
                client.infer("identity", [big])
            with pytest.raises(InferenceServerException, match="header list"):
                client.infer("identity", [x], headers={"x-large": "v" * 5000})
            # Idle past the timeout (what is tested): the test waits for the server's close of the client's
            # connection, within a bound, instead of a guessed 2.5 s; then the client reconnects for the next call.
            kept = established_to(server.port)
            assert kept, "the client did not keep its connection"
            holds = waits.holds_within(lambda: not kept & established_to(server.port), 30)
            assert holds, "the idle connection was not closed"
            assert client.infer("identity", [x]).as_numpy("OUT_FP32").sum() == 100
        assert "idle" not in server.log or "Traceback" not in server.log
