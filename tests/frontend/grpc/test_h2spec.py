"""The h2spec conformance suite (github.com/summerwind/h2spec: `http2/`, `generic/`, `hpack/`), case by case, as
Python tests against the gRPC port of a real server over raw sockets. Each test is named after its h2spec case
(section and number) and says its id in the docstring. h2spec is not installable here; these follow its source.

All 147 cases apply to a cleartext HTTP/2 server (this version of h2spec has no TLS cases; 8.2/1 is a client
sending PUSH_PROMISE, which applies). Checks are at least as strict as h2spec's: where h2spec accepts "GOAWAY with
the code, or the connection closed", we require the GOAWAY and its code; where it accepts a stream error as
RST_STREAM or GOAWAY, we require the code it lists.

Adaptations for a gRPC server (h2spec assumes a web server that reads a request to its end and answers "/" with
a body):
* our server answers a request for an unknown path ("/", GET, HEAD) at once, trailers-only (gRPC status
  UNIMPLEMENTED), and resets what the client still sends with RST_STREAM NO_ERROR, as grpc's servers do. The
  cases that need a stream to stay open while the client sends more (5.1/8-10, 6.9/2, 6.9.1/3, 8.1/1, 8.1.2.1/3,
  8.1.2.6/1-2, and generic/2/2-3 for a half-closed stream) use a real method
  (`/inference.GRPCInferenceService/ServerLive`), which waits for its request message;
* the cases that need a response body (6.5.3/1, 6.9.1/1, 6.9.2/1-2, 5.1.2/1, generic/2/2-3) send ServerLive a
  request message; its answer is a 7-byte DATA frame (gRPC prefix + `live: true`);
* 4.2/1 sends a DATA frame of the size the server advertises (SETTINGS_MAX_FRAME_SIZE, 16 MiB - 1), as h2spec
  does; no frame can be larger, so 4.2/2 runs on the transport configured with 16384; 4.2/3 sends five 4000-byte
  header fields in one HEADERS frame: more than a header-carrying frame may hold here (16 KiB, as
  SETTINGS_MAX_HEADER_LIST_SIZE), a connection error FRAME_SIZE_ERROR as h2spec expects.
"""

from __future__ import annotations

import os

import pytest

from pytriton.frontend.h2.connection import H2Limits
from tests._support.serving import serve, tensor_args
from tests.frontend.grpc.inproc import InProcessServer
from tests.frontend.grpc.raw_h2 import (
    ACK,
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    HEADERS,
    NO_ERROR,
    PADDED,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    REFUSED_STREAM,
    RST_STREAM,
    S_ENABLE_PUSH,
    S_HEADER_TABLE_SIZE,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_CONCURRENT_STREAMS,
    S_MAX_FRAME_SIZE,
    S_MAX_HEADER_LIST_SIZE,
    SETTINGS,
    STREAM_CLOSED,
    RawH2,
    frame,
    goaway,
    grpc_message,
    ping,
    priority,
    rst_stream,
    settings,
    window_update,
)

IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN", "fp32", "-1")]) + tensor_args(
    "output", [("OUT", "fp32", "-1")]
)
# h2spec checks our HTTP/2 transport, not grpc's server (PYTRITON_GRPC_SERVER=grpcio)
pytestmark = pytest.mark.skipif(os.environ.get("PYTRITON_GRPC_SERVER") == "grpcio", reason="tests our HTTP/2 transport")
LIVE = grpc_message(b"")  # a ServerLiveRequest; the answer is 7 bytes: the prefix and `live: true`
DUMMY = "x" * 4000  # h2spec's MaxHeaderLen


@pytest.fixture(scope="module")
def port():
    with serve("tests.models:identity", *IDENTITY) as server:
        yield server.port


@pytest.fixture
def conn(port):
    with RawH2(port) as raw:
        raw.handshake()
        yield raw


def dummy(raw: RawH2, count: int = 1) -> bytes:
    return raw.encode([(f"x-dummy{i}", DUMMY) for i in range(count)])


def open_live(raw: RawH2, stream_id: int = 1) -> None:
    """A ServerLive call whose request goes on: the stream stays open."""
    raw.headers(stream_id, raw.grpc_request("ServerLive"), end_stream=False)


def ask_live(raw: RawH2, stream_id: int = 1) -> None:
    """A complete ServerLive call: its answer has a body."""
    raw.headers(stream_id, raw.grpc_request("ServerLive"), end_stream=False)
    raw.data(stream_id, LIVE)


def expect_data(raw: RawH2, stream_id: int, length: int) -> None:
    item = raw.wait_for(lambda f: f.type == DATA and f.stream_id == stream_id, f"DATA on stream {stream_id}")
    assert len(item.payload) == length, f"DATA of {len(item.payload)} bytes, expected {length}"


def ping_answered(raw: RawH2, data: bytes = b"h2spec\x00\x00") -> None:
    """h2spec's VerifyPingFrameOrConnectionClose: we require the PING acknowledgement."""
    raw.send(ping(data))
    raw.expect_ping_ack(data)


# ---- http2/3.5 HTTP/2 Connection Preface ------------------------------------------------------------------------


def test_3_5_1_client_connection_preface(port):
    """http2/3.5/1: the server's preface (a SETTINGS frame) is the first frame it sends."""
    with RawH2(port) as raw:
        raw.send(PREFACE + settings((S_INITIAL_WINDOW_SIZE, 65535)))
        first = raw.read_frame()
        assert first is not None and first.type == SETTINGS and not first.flags & ACK


def test_3_5_2_invalid_connection_preface(port):
    """http2/3.5/2: an invalid preface is a connection error PROTOCOL_ERROR."""
    with RawH2(port) as raw:
        raw.send(b"INVALID CONNECTION PREFACE\r\n\r\n")
        raw.expect_connection_error(PROTOCOL_ERROR)


# ---- http2/4 HTTP Frames -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["4.1/1", "5.5/1"])
def test_4_1_1_and_5_5_1_unknown_frame_type(conn, case):
    """http2/4.1/1 and 5.5/1 (the same case): a frame of unknown type is ignored."""
    conn.send(frame(0x16, 0, 0, bytes(8)))
    conn.send(ping())
    conn.expect_ping_ack()


def test_4_1_2_undefined_flag(conn):
    """http2/4.1/2: undefined flags are ignored."""
    conn.send(frame(PING, 0x16, 0, bytes(8)))
    conn.expect_ping_ack()


def test_4_1_3_reserved_bit(conn):
    """http2/4.1/3: the reserved bit of the stream identifier is ignored."""
    conn.send(frame(PING, 0x16, 0x80000000, bytes(8)))
    conn.expect_ping_ack()


def test_4_2_1_data_frame_of_max_frame_size(conn):
    """http2/4.2/1: a DATA frame as large as SETTINGS_MAX_FRAME_SIZE (advertised: 16 MiB - 1) is processed."""
    size = conn.server_settings.get(S_MAX_FRAME_SIZE, 16384)
    conn.headers(1, conn.request(method="POST"), end_stream=False)
    conn.data(1, b"x" * size)
    conn.expect_headers(1)


def test_4_2_2_data_frame_over_max_frame_size():
    """http2/4.2/2: a DATA frame larger than SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR. The server advertises
    the largest size a frame header can state (2^24 - 1), so this runs on the transport configured with the
    protocol's default of 16384."""
    with InProcessServer(H2Limits(max_frame_size=16384)) as server, RawH2(server.port) as raw:
        raw.handshake()
        assert raw.server_settings[S_MAX_FRAME_SIZE] == 16384
        raw.headers(1, raw.request("/t.S/Hold", "POST"), end_stream=False)
        try:
            raw.send(frame(DATA, END_STREAM, 1, b"x" * 16385))
        except OSError:  # the server may close before it has read all of it
            pass
        raw.expect_stream_error(1, FRAME_SIZE_ERROR)


def test_4_2_3_headers_frame_over_its_limit(conn):
    """http2/4.2/3: a HEADERS frame beyond what a header-carrying frame may be is a connection FRAME_SIZE_ERROR."""
    conn.headers(1, conn.request() + dummy(conn, 5))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_4_3_1_invalid_header_block(conn):
    """http2/4.3/1: a header block HPACK cannot decode is a connection error COMPRESSION_ERROR."""
    conn.send(b"\x00\x00\x01\x01\x05\x00\x00\x00\x01\x40")
    conn.expect_connection_error(COMPRESSION_ERROR)


@pytest.mark.parametrize("case", ["4.3/2", "6.2/1"])
def test_4_3_2_and_6_2_1_priority_inside_a_header_block(conn, case):
    """http2/4.3/2 and 6.2/1 (the same case): a PRIORITY frame between HEADERS and CONTINUATION is a connection
    error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(), end_stream=False, end_headers=False)
    conn.send(priority(1))
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("case", ["4.3/3", "6.2/2"])
def test_4_3_3_and_6_2_2_headers_of_another_stream_inside_a_header_block(conn, case):
    """http2/4.3/3 and 6.2/2 (the same case): HEADERS of another stream inside a header block is a connection
    error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(), end_stream=False, end_headers=False)
    conn.headers(3, conn.request())
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ---- http2/5.1 Stream States ---------------------------------------------------------------------------------------


def test_5_1_1_idle_data(conn):
    """http2/5.1/1: DATA on an idle stream: PROTOCOL_ERROR (RFC 9113 5.1) or STREAM_CLOSED (6.1)."""
    conn.data(1, b"test")
    conn.expect_stream_error(1, PROTOCOL_ERROR, STREAM_CLOSED)


@pytest.mark.parametrize("case", ["5.1/2", "6.4/2"])
def test_5_1_2_and_6_4_2_idle_rst_stream(conn, case):
    """http2/5.1/2 and 6.4/2 (the same case): RST_STREAM on an idle stream is a connection error PROTOCOL_ERROR."""
    conn.send(rst_stream(1, 8))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_3_idle_window_update(conn):
    """http2/5.1/3: WINDOW_UPDATE on an idle stream is a connection error PROTOCOL_ERROR."""
    conn.send(window_update(1, 100))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_4_idle_continuation(conn):
    """http2/5.1/4: CONTINUATION on an idle stream is a connection error PROTOCOL_ERROR."""
    conn.send(frame(CONTINUATION, END_HEADERS, 1, conn.request()))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_5_half_closed_remote_data(conn):
    """http2/5.1/5: DATA after END_STREAM is a stream error STREAM_CLOSED."""
    conn.headers(1, conn.request())
    conn.data(1, b"test")
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_6_half_closed_remote_headers(conn):
    """http2/5.1/6: HEADERS after END_STREAM is a stream error STREAM_CLOSED."""
    conn.headers(1, conn.request())
    conn.headers(1, conn.request())
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_7_half_closed_remote_continuation(conn):
    """http2/5.1/7: CONTINUATION after a complete header block: STREAM_CLOSED or PROTOCOL_ERROR."""
    block = conn.request()
    conn.headers(1, block)
    conn.send(frame(CONTINUATION, END_HEADERS, 1, block))
    conn.expect_stream_error(1, STREAM_CLOSED, PROTOCOL_ERROR)


def test_5_1_8_closed_data_after_rst_stream(conn):
    """http2/5.1/8: DATA after the client's RST_STREAM is a stream error STREAM_CLOSED."""
    open_live(conn)
    conn.send(rst_stream(1, 8))
    conn.data(1, b"test")
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_9_closed_headers_after_rst_stream(conn):
    """http2/5.1/9: HEADERS after the client's RST_STREAM is a stream error STREAM_CLOSED."""
    open_live(conn)
    conn.send(rst_stream(1, 8))
    conn.headers(1, conn.request())
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_10_closed_continuation_after_rst_stream(conn):
    """http2/5.1/10: CONTINUATION after the client's RST_STREAM: STREAM_CLOSED or PROTOCOL_ERROR."""
    open_live(conn)
    conn.send(rst_stream(1, 8))
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_stream_error(1, STREAM_CLOSED, PROTOCOL_ERROR)


def test_5_1_11_closed_data(conn):
    """http2/5.1/11: DATA on a stream closed by END_STREAM both ways is a STREAM_CLOSED error."""
    conn.headers(1, conn.request())
    conn.expect_stream_end(1)
    conn.data(1, b"test")
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_12_closed_headers(conn):
    """http2/5.1/12: HEADERS on a stream closed by END_STREAM both ways is a connection error STREAM_CLOSED."""
    conn.headers(1, conn.request())
    conn.expect_stream_end(1)
    conn.headers(1, conn.request())
    conn.expect_connection_error(STREAM_CLOSED)


def test_5_1_13_closed_continuation(conn):
    """http2/5.1/13: CONTINUATION on a closed stream: connection error STREAM_CLOSED or PROTOCOL_ERROR."""
    conn.headers(1, conn.request())
    conn.expect_stream_end(1)
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_connection_error(STREAM_CLOSED, PROTOCOL_ERROR)


def test_5_1_1_1_even_stream_identifier(conn):
    """http2/5.1.1/1: a client opening an even-numbered stream is a connection error PROTOCOL_ERROR."""
    conn.headers(2, conn.request())
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_1_2_smaller_stream_identifier(conn):
    """http2/5.1.1/2: a new stream id smaller than a previous one is a connection error PROTOCOL_ERROR."""
    conn.headers(5, conn.request())
    conn.headers(3, conn.request())
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_2_1_concurrent_stream_limit(conn):
    """http2/5.1.2/1: streams past SETTINGS_MAX_CONCURRENT_STREAMS are refused (REFUSED_STREAM or PROTOCOL_ERROR).
    With a window of 0 the answers cannot be sent, so every stream stays open."""
    limit = conn.server_settings[S_MAX_CONCURRENT_STREAMS]
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 0)))
    block = conn.grpc_request("ServerLive")
    out = []
    for i in range(limit + 1):
        out.append(frame(HEADERS, END_HEADERS, 1 + 2 * i, block) + frame(DATA, END_STREAM, 1 + 2 * i, LIVE))
    conn.send(b"".join(out))
    item = conn.wait_for(lambda f: f.type in (RST_STREAM, 7), "a refused stream", timeout_s=60)
    assert item.type == RST_STREAM and item.stream_id == 1 + 2 * limit and item.code in (REFUSED_STREAM,
                                                                                          PROTOCOL_ERROR)


def test_5_3_1_1_headers_depending_on_itself(conn):
    """http2/5.3.1/1: HEADERS whose priority depends on its own stream is a stream error PROTOCOL_ERROR."""
    conn.send(frame(HEADERS, END_STREAM | END_HEADERS | PRIORITY_FLAG, 1, b"\x00\x00\x00\x01\xff" + conn.request()))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_5_3_1_2_priority_depending_on_itself(conn):
    """http2/5.3.1/2: PRIORITY depending on its own stream is a PROTOCOL_ERROR."""
    conn.send(priority(1, depends_on=1))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_5_4_1_1_invalid_ping_closes(conn):
    """http2/5.4.1/1: after a connection error the connection is closed."""
    conn.send(frame(PING, 0, 3, bytes(8)))
    conn.expect_closed()


def test_5_4_1_2_invalid_ping_goaway(conn):
    """http2/5.4.1/2 (strict): a connection error sends GOAWAY first."""
    conn.send(frame(PING, 0, 3, bytes(8)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_5_2_unknown_frame_inside_a_header_block(conn):
    """http2/5.5/2: an unknown frame inside a header block is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(), end_headers=False)
    conn.send(frame(0x16, 0, 0, bytes(8)))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ---- http2/6 Frame Definitions -----------------------------------------------------------------------------------


def test_6_1_1_data_on_stream_0(conn):
    """http2/6.1/1: DATA on stream 0 is a connection error PROTOCOL_ERROR."""
    conn.data(0, b"test")
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_1_2_data_on_a_stream_not_open(conn):
    """http2/6.1/2: DATA on a stream that is not open is a stream error STREAM_CLOSED."""
    conn.headers(1, conn.request(method="POST"))
    conn.data(1, b"test")
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_6_1_3_data_with_invalid_pad_length(conn):
    """http2/6.1/3: padding at least as long as the DATA payload is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(method="POST", extra=[("content-length", "4")]), end_stream=False)
    conn.send(b"\x00\x00\x05\x00\x09\x00\x00\x00\x01" + b"\x06\x54\x65\x73\x74")
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_3_headers_on_stream_0(conn):
    """http2/6.2/3: HEADERS on stream 0 is a connection error PROTOCOL_ERROR."""
    conn.headers(0, conn.request())
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_4_headers_with_invalid_pad_length(conn):
    """http2/6.2/4: padding longer than the HEADERS payload is a PROTOCOL_ERROR."""
    block = conn.request()
    conn.send(frame(HEADERS, END_STREAM | END_HEADERS | PADDED, 1, bytes([len(block) + 2]) + block))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_6_3_1_priority_on_stream_0(conn):
    """http2/6.3/1: PRIORITY on stream 0 is a connection error PROTOCOL_ERROR."""
    conn.send(priority(0))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_3_2_priority_of_wrong_length(conn):
    """http2/6.3/2: PRIORITY of a length other than 5 is a stream error FRAME_SIZE_ERROR."""
    conn.headers(1, conn.request())
    conn.send(b"\x00\x00\x04\x02\x00\x00\x00\x00\x01" + b"\x80\x00\x00\x01")
    conn.expect_stream_error(1, FRAME_SIZE_ERROR)


def test_6_4_1_rst_stream_on_stream_0(conn):
    """http2/6.4/1: RST_STREAM on stream 0 is a connection error PROTOCOL_ERROR."""
    conn.send(rst_stream(0, 8))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_4_3_rst_stream_of_wrong_length(conn):
    """http2/6.4/3: RST_STREAM of a length other than 4 is a connection error FRAME_SIZE_ERROR."""
    conn.headers(1, conn.request())
    conn.send(b"\x00\x00\x03\x03\x00\x00\x00\x00\x01" + b"\x00\x00\x00")
    conn.expect_stream_error(1, FRAME_SIZE_ERROR)


def test_6_5_1_settings_ack_with_payload(conn):
    """http2/6.5/1: a SETTINGS acknowledgement with a payload is a connection error FRAME_SIZE_ERROR."""
    conn.send(b"\x00\x00\x01\x04\x01\x00\x00\x00\x00" + b"\x00")
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_5_2_settings_on_a_stream(conn):
    """http2/6.5/2: SETTINGS on a stream is a connection error PROTOCOL_ERROR."""
    conn.send(b"\x00\x00\x06\x04\x00\x00\x00\x00\x01" + b"\x00\x03\x00\x00\x00\x64")
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_5_3_settings_of_wrong_length(conn):
    """http2/6.5/3: SETTINGS of a length not a multiple of 6 is a FRAME_SIZE_ERROR (or PROTOCOL_ERROR)."""
    conn.send(b"\x00\x00\x03\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00")
    conn.expect_connection_error(FRAME_SIZE_ERROR, PROTOCOL_ERROR)


@pytest.mark.parametrize(
    "case, setting, code",
    [
        ("6.5.2/1 SETTINGS_ENABLE_PUSH 2", (S_ENABLE_PUSH, 2), PROTOCOL_ERROR),
        ("6.5.2/2 SETTINGS_INITIAL_WINDOW_SIZE 2^31", (S_INITIAL_WINDOW_SIZE, 2147483648), FLOW_CONTROL_ERROR),
        ("6.5.2/3 SETTINGS_MAX_FRAME_SIZE 16383", (S_MAX_FRAME_SIZE, 16383), PROTOCOL_ERROR),
        ("6.5.2/4 SETTINGS_MAX_FRAME_SIZE 2^24", (S_MAX_FRAME_SIZE, 16777216), PROTOCOL_ERROR),
    ],
)
def test_6_5_2_1_to_4_settings_out_of_range(conn, case, setting, code):
    """http2/6.5.2/1-4: ENABLE_PUSH other than 0 or 1, INITIAL_WINDOW_SIZE above 2^31-1 (FLOW_CONTROL_ERROR),
    MAX_FRAME_SIZE outside 16384 .. 2^24-1: connection errors."""
    conn.send(settings(setting))
    conn.expect_connection_error(code)


def test_6_5_2_5_unknown_setting(conn):
    """http2/6.5.2/5: an unknown setting is ignored."""
    conn.send(settings((0xFF, 1)))
    conn.send(ping())
    conn.expect_ping_ack()


def test_6_5_3_1_settings_applied_in_order(conn):
    """http2/6.5.3/1: settings take effect in the order they appear: the window ends at 1."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 100), (S_INITIAL_WINDOW_SIZE, 1)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")
    ask_live(conn)
    expect_data(conn, 1, 1)


def test_6_5_3_2_settings_ack(conn):
    """http2/6.5.3/2: SETTINGS is acknowledged at once."""
    conn.send(settings((S_ENABLE_PUSH, 0)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")


def test_6_7_1_ping(conn):
    """http2/6.7/1: PING is answered with an identical payload and ACK."""
    conn.send(ping(b"h2spec\x00\x00"))
    conn.expect_ping_ack(b"h2spec\x00\x00")


def test_6_7_2_ping_ack_not_answered(conn):
    """http2/6.7/2: a PING with ACK is not answered."""
    conn.send(ping(b"invalid\x00", ack=True))
    conn.send(ping(b"h2spec\x00\x00"))
    item = conn.wait_for(lambda f: f.type == PING, "PING")
    assert item.flags & ACK and item.payload == b"h2spec\x00\x00"


def test_6_7_3_ping_on_a_stream(conn):
    """http2/6.7/3: PING on a stream is a connection error PROTOCOL_ERROR."""
    conn.send(frame(PING, 0, 1, bytes(8)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_7_4_ping_of_wrong_length(conn):
    """http2/6.7/4: PING of a length other than 8 is a connection error FRAME_SIZE_ERROR."""
    conn.send(frame(PING, 0, 0, bytes(6)))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_8_1_goaway_on_a_stream(conn):
    """http2/6.8/1: GOAWAY on a stream is a connection error PROTOCOL_ERROR."""
    conn.send(frame(7, 0, 1, bytes(8)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_9_1_window_update_of_0(conn):
    """http2/6.9/1: a connection WINDOW_UPDATE of 0 is a connection error PROTOCOL_ERROR."""
    conn.send(window_update(0, 0))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_9_2_window_update_of_0_on_a_stream(conn):
    """http2/6.9/2: a stream WINDOW_UPDATE of 0 is a stream error PROTOCOL_ERROR."""
    open_live(conn)
    conn.send(window_update(1, 0))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_6_9_3_window_update_of_wrong_length(conn):
    """http2/6.9/3: WINDOW_UPDATE of a length other than 4 is a connection error FRAME_SIZE_ERROR."""
    conn.send(b"\x00\x00\x03\x08\x00\x00\x00\x00\x00" + b"\x00\x00\x01")
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_9_1_1_window_of_1(conn):
    """http2/6.9.1/1: with a window of 1, DATA frames carry 1 byte."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 1)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")
    ask_live(conn)
    expect_data(conn, 1, 1)


def test_6_9_1_2_connection_window_overflow(conn):
    """http2/6.9.1/2: a connection window above 2^31-1 is a connection error FLOW_CONTROL_ERROR."""
    conn.send(window_update(0, 2147483647) + window_update(0, 2147483647))
    item = conn.wait_for(lambda f: f.type == 7, "GOAWAY")
    assert item.code == FLOW_CONTROL_ERROR


def test_6_9_1_3_stream_window_overflow(conn):
    """http2/6.9.1/3: a stream window above 2^31-1 is a stream error FLOW_CONTROL_ERROR (RST_STREAM)."""
    open_live(conn)
    conn.send(window_update(1, 2147483647) + window_update(1, 2147483647))
    item = conn.wait_for(lambda f: f.type in (RST_STREAM, 7), "RST_STREAM")
    assert item.type == RST_STREAM and item.stream_id == 1 and item.code == FLOW_CONTROL_ERROR


def test_6_9_2_1_initial_window_change_applies_to_open_streams(conn):
    """http2/6.9.2/1: a change of SETTINGS_INITIAL_WINDOW_SIZE adjusts the windows of open streams."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 0)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")
    ask_live(conn)
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 1)))
    expect_data(conn, 1, 1)


def test_6_9_2_2_negative_window(conn):
    """http2/6.9.2/2: a window made negative by SETTINGS is tracked: +2 on -1 allows 1 byte."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 3)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")
    ask_live(conn)
    expect_data(conn, 1, 3)
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 2)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")
    conn.send(window_update(1, 2))
    expect_data(conn, 1, 1)


def test_6_9_2_3_initial_window_size_too_large(conn):
    """http2/6.9.2/3: SETTINGS_INITIAL_WINDOW_SIZE of 2^31 is a connection error FLOW_CONTROL_ERROR."""
    conn.send(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x04\x80\x00\x00\x00")
    conn.expect_connection_error(FLOW_CONTROL_ERROR)


def test_6_10_1_continuation_frames(conn):
    """http2/6.10/1: HEADERS and several CONTINUATION frames make one header block."""
    conn.headers(1, conn.request(), end_headers=False)
    conn.send(frame(CONTINUATION, 0, 1, dummy(conn)))
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_headers(1)


def test_6_10_2_continuation_then_data(conn):
    """http2/6.10/2: a header block followed by DATA before it ends is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(method="POST"), end_stream=False, end_headers=False)
    conn.send(frame(CONTINUATION, 0, 1, dummy(conn)))
    conn.data(1, b"test")
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_3_continuation_on_stream_0(conn):
    """http2/6.10/3: CONTINUATION on stream 0 is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(), end_headers=False)
    conn.send(frame(CONTINUATION, END_HEADERS, 0, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_4_continuation_after_end_headers(conn):
    """http2/6.10/4: CONTINUATION after HEADERS with END_HEADERS is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request())
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_5_continuation_after_continuation_with_end_headers(conn):
    """http2/6.10/5: CONTINUATION after a CONTINUATION with END_HEADERS is a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(), end_headers=False)
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.send(frame(CONTINUATION, END_HEADERS, 1, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_6_continuation_after_data(conn):
    """http2/6.10/6: DATA inside a header block, then CONTINUATION: a connection error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(method="POST"), end_stream=False, end_headers=False)
    conn.data(1, b"test")
    conn.send(frame(CONTINUATION, 0, 1, dummy(conn)))
    conn.send(frame(CONTINUATION, END_HEADERS, 0, dummy(conn)))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ---- http2/7 Error Codes ---------------------------------------------------------------------------------------------


def test_7_1_goaway_with_unknown_error_code(conn):
    """http2/7/1: GOAWAY with an unknown error code triggers nothing special."""
    conn.send(goaway(0, 0xFF))
    ping_answered(conn)


def test_7_2_rst_stream_with_unknown_error_code(conn):
    """http2/7/2: RST_STREAM with an unknown error code triggers nothing special."""
    conn.headers(1, conn.request(method="POST"), end_stream=False)
    conn.send(rst_stream(1, 0xFF))
    ping_answered(conn, bytes(8))


# ---- http2/8 HTTP Message Exchanges --------------------------------------------------------------------------------


def test_8_1_1_second_headers_without_end_stream(conn):
    """http2/8.1/1: trailers without END_STREAM are a stream error PROTOCOL_ERROR."""
    open_live(conn)
    conn.data(1, b"test", end_stream=False)
    conn.headers(1, conn.encode([("x-test", "ok")]), end_stream=False)
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_1_uppercase_field_name(conn):
    """http2/8.1.2/1: an uppercase field name is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(extra=[("X-TEST", "ok")]))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_1_1_unknown_pseudo_header(conn):
    """http2/8.1.2.1/1: an unknown pseudo-header is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(extra=[(":test", "ok")]))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_1_2_response_pseudo_header(conn):
    """http2/8.1.2.1/2: a response pseudo-header in a request is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(extra=[(":status", "200")]))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_1_3_pseudo_header_in_trailers(conn):
    """http2/8.1.2.1/3: a pseudo-header in trailers is a stream error PROTOCOL_ERROR."""
    open_live(conn)
    conn.data(1, b"test", end_stream=False)
    conn.headers(1, conn.encode([(":method", "POST")]), end_stream=False)
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_1_4_pseudo_header_after_regular_field(conn):
    """http2/8.1.2.1/4: a pseudo-header after a regular field is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.encode([("x-test", "ok"), (":method", "GET"), (":scheme", "http"), (":path", "/"),
                                 (":authority", "127.0.0.1")]))  # fmt: skip
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_2_1_connection_specific_field(conn):
    """http2/8.1.2.2/1: a connection-specific field is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(extra=[("connection", "keep-alive")]))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_2_2_te_other_than_trailers(conn):
    """http2/8.1.2.2/2: TE with a value other than "trailers" is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.request(extra=[("trailers", "test"), ("te", "trailers, deflate")]))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


@pytest.mark.parametrize(
    "case, fields",
    [
        ("8.1.2.3/1 empty :path", [(":method", "GET"), (":scheme", "http"), (":path", ""), (":authority", "a")]),
        ("8.1.2.3/2 no :method", [(":scheme", "http"), (":path", "/"), (":authority", "a")]),
        ("8.1.2.3/3 no :scheme", [(":method", "GET"), (":path", "/"), (":authority", "a")]),
        ("8.1.2.3/4 no :path", [(":method", "GET"), (":scheme", "http"), (":authority", "a")]),
        ("8.1.2.3/5 two :method", [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a"),
                                   (":method", "GET")]),
        ("8.1.2.3/6 two :scheme", [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a"),
                                   (":scheme", "http")]),
        ("8.1.2.3/7 two :path", [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a"),
                                 (":path", "/")]),
    ],
)  # fmt: skip
def test_8_1_2_3_request_pseudo_headers(conn, case, fields):
    """http2/8.1.2.3/1-7: an empty, missing or repeated request pseudo-header is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.encode(fields))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_6_1_content_length_mismatch(conn):
    """http2/8.1.2.6/1: DATA longer than content-length is a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.grpc_request("ServerLive", [("content-length", "1")]), end_stream=False)
    conn.data(1, b"test")
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_2_6_2_content_length_mismatch_over_frames(conn):
    """http2/8.1.2.6/2: DATA frames adding up to more than content-length are a stream error PROTOCOL_ERROR."""
    conn.headers(1, conn.grpc_request("ServerLive", [("content-length", "1")]), end_stream=False)
    conn.data(1, b"test", end_stream=False)
    conn.data(1, b"test")
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_2_1_push_promise_from_a_client(conn):
    """http2/8.2/1: PUSH_PROMISE from a client is a connection error PROTOCOL_ERROR."""
    conn.send(frame(PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x03" + conn.request()))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ---- generic: what a server must accept --------------------------------------------------------------------------


def test_generic_1_1_client_connection_preface(port):
    """generic/1/1: the client preface is accepted: the server answers with SETTINGS."""
    test_3_5_1_client_connection_preface(port)


def test_generic_2_1_priority_on_idle_stream(conn):
    """generic/2/1: PRIORITY on an idle stream is accepted."""
    conn.send(priority(1))
    ping_answered(conn)


def test_generic_2_2_window_update_on_half_closed_stream(conn):
    """generic/2/2: WINDOW_UPDATE on a half-closed (remote) stream is accepted (it lets the answer out)."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 0)))
    ask_live(conn)
    conn.send(window_update(1, 1))
    conn.wait_for(lambda f: f.type == DATA and f.stream_id == 1, "DATA")


def test_generic_2_3_priority_on_half_closed_stream(conn):
    """generic/2/3: PRIORITY on a half-closed (remote) stream is accepted."""
    conn.send(settings((S_INITIAL_WINDOW_SIZE, 0)))
    ask_live(conn)
    conn.send(priority(1))
    conn.send(window_update(1, 1))
    conn.wait_for(lambda f: f.type == DATA and f.stream_id == 1, "DATA")


def test_generic_2_4_rst_stream_on_half_closed_stream(conn):
    """generic/2/4: RST_STREAM on a half-closed (remote) stream is accepted."""
    conn.headers(1, conn.request())
    conn.send(rst_stream(1, 8))
    ping_answered(conn)


def test_generic_2_5_priority_on_closed_stream(conn):
    """generic/2/5: PRIORITY on a closed stream is accepted."""
    conn.headers(1, conn.request())
    conn.expect_stream_end(1)
    conn.send(priority(1))
    ping_answered(conn)


@pytest.mark.parametrize("cuts", [(5,), (5, 10)], ids=["3.10/1", "3.10/2"])
def test_generic_3_10_continuation(conn, cuts):
    """generic/3.10/1-2: a header block in HEADERS and one or more CONTINUATION frames."""
    block = conn.request()
    pieces = [block[a:b] for a, b in zip((0, *cuts), (*cuts, len(block)))]
    conn.headers(1, pieces[0], end_headers=False)
    for i, piece in enumerate(pieces[1:], 1):
        conn.send(frame(CONTINUATION, END_HEADERS if i == len(pieces) - 1 else 0, 1, piece))
    conn.expect_headers(1)


@pytest.mark.parametrize("how", ["one", "two", "padded"], ids=["3.1/1", "3.1/2", "3.1/3"])
def test_generic_3_1_data(conn, how):
    """generic/3.1/1-3: DATA, several DATA frames, padded DATA."""
    conn.headers(1, conn.request(method="POST"), end_stream=False)
    if how == "one":
        conn.data(1, b"test")
    elif how == "two":
        conn.data(1, b"test", end_stream=False)
        conn.data(1, b"test")
    else:
        conn.send(frame(DATA, END_STREAM | PADDED, 1, b"\x05test" + bytes(5)))
    conn.expect_headers(1)


@pytest.mark.parametrize("how", ["plain", "padded", "priority"], ids=["3.2/1", "3.2/2", "3.2/3"])
def test_generic_3_2_headers(conn, how):
    """generic/3.2/1-3: HEADERS, padded HEADERS, HEADERS with priority."""
    block = conn.request()
    if how == "plain":
        conn.headers(1, block)
    elif how == "padded":
        conn.send(frame(HEADERS, END_STREAM | END_HEADERS | PADDED, 1, b"\x08" + block + bytes(8)))
    else:
        conn.send(frame(HEADERS, END_STREAM | END_HEADERS | PRIORITY_FLAG, 1, b"\x00\x00\x00\x00\xff" + block))
    conn.expect_headers(1)


@pytest.mark.parametrize(
    "prior",
    [priority(1, weight=0), priority(1, weight=255), priority(3, depends_on=1), priority(1, exclusive=True),
     priority(3)],
    ids=["3.3/1", "3.3/2", "3.3/3", "3.3/4", "3.3/5"],
)
def test_generic_3_3_priority(conn, prior):
    """generic/3.3/1-5: PRIORITY (weights 1 and 256, a dependency, exclusive, on a higher idle stream), then a
    request on stream 1."""
    conn.send(prior)
    conn.headers(1, conn.request())
    conn.expect_headers(1)


def test_generic_3_4_1_rst_stream(conn):
    """generic/3.4/1: RST_STREAM is accepted."""
    conn.headers(1, conn.request())
    conn.send(rst_stream(1, 8))
    ping_answered(conn)


def test_generic_3_5_1_settings(conn):
    """generic/3.5/1: SETTINGS with every defined parameter is acknowledged."""
    conn.send(settings((S_HEADER_TABLE_SIZE, 4096), (S_ENABLE_PUSH, 1), (S_MAX_CONCURRENT_STREAMS, 100),
                       (S_INITIAL_WINDOW_SIZE, 65535), (S_MAX_FRAME_SIZE, 16384), (S_MAX_HEADER_LIST_SIZE, 100)))
    conn.wait_for(lambda f: f.type == SETTINGS and f.flags & ACK, "SETTINGS ACK")


def test_generic_3_7_1_ping(conn):
    """generic/3.7/1: PING is answered."""
    conn.send(ping())
    conn.expect_ping_ack()


def test_generic_3_8_1_goaway(conn):
    """generic/3.8/1: GOAWAY is accepted."""
    conn.send(goaway(0, NO_ERROR, b"h2spec"))
    ping_answered(conn)


def test_generic_3_9_1_window_update_on_connection(conn):
    """generic/3.9/1: WINDOW_UPDATE on the connection is accepted."""
    conn.send(window_update(0, 1))
    conn.send(ping())
    conn.expect_ping_ack()


def test_generic_3_9_2_window_update_on_stream(conn):
    """generic/3.9/2: WINDOW_UPDATE on a stream is accepted."""
    conn.headers(1, conn.request())
    conn.send(window_update(1, 1))
    conn.expect_headers(1)


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "POST with trailers"], ids=["4/1", "4/2", "4/3", "4/4"])
def test_generic_4_requests(conn, method):
    """generic/4/1-4: GET, HEAD, POST and POST with trailers get an answer."""
    if method.startswith("POST"):
        trailers = method.endswith("trailers")
        conn.headers(1, conn.request(method="POST", extra=[("trailer", "x-test")] if trailers else []),
                     end_stream=False)  # fmt: skip
        conn.data(1, b"test", end_stream=not trailers)
        if trailers:
            conn.headers(1, conn.encode([("x-test", "ok")]))
    else:
        conn.headers(1, conn.request(method=method))
    conn.expect_headers(1)


REPRESENTATIONS = [
    ("5/1", b"\xba"),
    ("5/2", b"\x40\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"),
    ("5/3", b"\x40\x0a\x75\x73\x65\x72\x2d\x61\x67\x65\x6e\x74\x06\x68\x32\x73\x70\x65\x63"),
    ("5/4", b"\x40\x06\x78\x2d\x74\x65\x73\x74\x06\x68\x32\x73\x70\x65\x63"),
    ("5/5", b"\x40\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4"),
    ("5/6", b"\x00\x0a\x75\x73\x65\x72\x2d\x61\x67\x65\x6e\x74\x06\x68\x32\x73\x70\x65\x63"),
    ("5/7", b"\x00\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"),
    ("5/8", b"\x00\x06\x78\x2d\x74\x65\x73\x74\x06\x68\x32\x73\x70\x65\x63"),
    ("5/9", b"\x00\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4"),
    ("5/10", b"\x10\x0a\x75\x73\x65\x72\x2d\x61\x67\x65\x6e\x74\x06\x68\x32\x73\x70\x65\x63"),
    ("5/11", b"\x10\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"),
    ("5/12", b"\x10\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4"),
    ("5/13", b"\x10\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4"),
]


@pytest.mark.parametrize("rep", [r for _, r in REPRESENTATIONS], ids=[i for i, _ in REPRESENTATIONS])
def test_generic_5_hpack_representations(conn, rep):
    """generic/5/1-13: indexed fields, literals with and without indexing and never indexed, indexed and new names,
    with and without Huffman coding, all decode."""
    conn.headers(1, conn.request() + rep)
    conn.expect_headers(1)


def test_generic_5_14_dynamic_table_size_update(conn):
    """generic/5/14: a dynamic table size update (to 128) is accepted."""
    conn.encoder.header_table_size = 128
    conn.headers(1, conn.request())
    conn.expect_headers(1)


def test_generic_5_15_two_dynamic_table_size_updates(conn):
    """generic/5/15: two dynamic table size updates (128, then 4096) are accepted."""
    conn.headers(1, b"\x3f\x61\x3f\xe1\x1f" + conn.request())
    conn.expect_headers(1)


# ---- hpack: decoding errors are connection errors COMPRESSION_ERROR --------------------------------------------------

DECODING_ERRORS = [
    ("2.3.3/1 indexed field, index 70", None, b"\xc6"),
    ("2.3.3/2 literal, name index 70", None, b"\x7f\x07\x00"),
    ("4.2/1 table size update at the end", None, b"\x21"),
    ("5.2/1 Huffman padding over 7 bits", None, b"\x00\x85\xf2\xb2\x4a\x84\xff\x84\x49\x50\x9f\xff"),
    ("5.2/2 Huffman padded with zeros", None, b"\x00\x85\xf2\xb2\x4a\x84\xff\x83\x49\x50\x90"),
    ("5.2/3 Huffman EOS", None, b"\x00\x85\xf2\xb2\x4a\x84\xff\x87\x49\x51\xff\xff\xff\xfa\x7f"),
    ("6.1/1 indexed field, index 0", None, b"\x80"),
    ("6.3/1 table size 4097", b"\x3f\xe2\x1f", None),
]


@pytest.mark.parametrize("before, after", [(b, a) for _, b, a in DECODING_ERRORS], ids=[i for i, *_ in DECODING_ERRORS])
def test_hpack_decoding_errors(conn, before, after):
    """hpack/2.3.3/1-2, 4.2/1, 5.2/1-3, 6.1/1, 6.3/1: invalid indexes, a table size update at the end of a block
    or above SETTINGS_HEADER_TABLE_SIZE, bad Huffman strings: connection errors COMPRESSION_ERROR."""
    conn.headers(1, (before or b"") + conn.request() + (after or b""))
    conn.expect_connection_error(COMPRESSION_ERROR)
