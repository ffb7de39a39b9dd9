"""Reading requests under the limits: bytes from the socket become `HttpRequest`s (httptools parses them).

- The socket reads into a buffer that all connections of a listener share (a read is parsed before the next one
  starts), so an idle connection holds no read buffer. A large Content-Length body is read by the socket straight
  into its own buffer (`DirectBody`, one copy on the way in), which grows with the bytes that arrive.
- The parser is never handed a byte past the end of the message it reads: a head up to the next place it can end
  (`HEAD_END`), a Content-Length body exactly, a chunked body's data exactly (its size is read from the size line
  the parser took) and its framing (size lines, trailer fields) line by line. So every head starts at a known byte
  and is measured as sent; the parser sees at most `max_header_bytes` of a head, or of a chunked body's framing
  between two chunks' data (after the last: the trailer fields, which the parser gathers whole), and what is not
  ended within them is refused (431). What the parser finds first in the bytes decides the answer (a malformed head
  before the limit: 400), however the bytes fall into reads. Header fields are counted (431), and repeated names
  are joined once, when the head is complete (linear, not quadratic).
- Bodies: larger than `max_input_bytes` → 413 as soon as that is known: at the head for a Content-Length past
  it, at the chunk that passes it for a chunked body. Nothing after it is parsed (a body that never ends does not
  keep the parser busy); the connection closes after the answer. The head and body set the deadlines the connection
  keeps.
- Memory: what bodies hold is charged to the listener's `BufferBudget` (`budget.py`). After each read
  (`_settle`) a body that needs more than the budget has stops reading until the memory is charged; while memory is
  tight, reads are `TIGHT_READ` bytes, so a connection brings few bytes past the budget before it stops.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import httptools

from pytriton.config.http1 import HttpLimits
from pytriton.frontend.http1.body import BodyReceiver
from pytriton.frontend.http1.budget import TIGHT_READ, BufferBudget
from pytriton.frontend.http1.messages import KEEP_ALIVE_10, HttpRequest, HttpResponse

READ_BUFFER = 64 * 1024
# A body with a Content-Length of at least this many bytes is received straight into its own buffer.
DIRECT_BODY_MIN = 64 * 1024
# A head ends only just past LF CR LF (checked against the parser: the empty line's CR LF after a line's LF). Not
# CR LF CR LF: a request line without a version (HTTP/0.9, which the parser takes) may end with a bare LF.
HEAD_END = b"\n\r\n"
TAIL = len(HEAD_END) - 1  # bytes kept from the end of a read: a HEAD_END may straddle two reads
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]+")  # how a chunk's size line the parser took begins
# Header names as clients spell them -> their lower-case text, and request targets -> (path, query): clients send the
# same few with every request. Bounded: past the limit a cache starts again empty.
NAMES_KEPT = 256
TARGETS_KEPT = 256
KEPT_MAX_BYTES = 256  # longer names and targets are decoded each time
_names: dict[bytes, str] = {}
_targets: dict[bytes, tuple[str, str]] = {}


def _target(url: bytes) -> tuple[str, str]:
    """(path, query) of a request target, as `HttpRequest` holds them."""
    known = _targets.get(url)
    if known is not None:
        return known
    parsed = httptools.parse_url(url)
    target = (parsed.path.decode("utf-8", "replace"), parsed.query.decode("utf-8", "replace") if parsed.query else "")
    if len(url) <= KEPT_MAX_BYTES:
        if len(_targets) >= TARGETS_KEPT:
            _targets.clear()
        _targets[url] = target
    return target

# What the connection is reading (the phase) ...
IDLE, HEAD, BODY, DIRECT, DONE = range(5)
# ... and what its deadline is for: the next request on a quiet keep-alive connection, a late head or body, the end
# of the linger after a refusal (`HttpConnection._linger`).
WAIT_IDLE, WAIT_HEAD, WAIT_BODY, WAIT_LINGER = range(4)


class SharedReadBuffer:
    """The buffer every connection of one listener reads into: each read is parsed before the next one."""

    __slots__ = ("data", "tight", "view")

    def __init__(self, size: int = READ_BUFFER):
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        self.tight = self.view[:TIGHT_READ]  # what a read may bring while memory is short


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that is refused (`RequestReader._refusal`)."""


class RequestReader(BodyReceiver):
    """The reading half of a connection; `HttpConnection` answers what it reads (`_enqueue`), refuses (`_refuse`)
    and keeps the deadlines (`_set_deadline`)."""

    __slots__ = (
        "_body_left",
        "_chunk_digits",
        "_chunk_left",
        "_chunk_size",
        "_crlf_due",
        "_direct_keep_alive",
        "_direct_method",
        "_framing",
        "_head_bytes",
        "_head_tail",
        "_http10",
        "_header_count",
        "_headers",
        "_now",
        "_phase",
        "_refusal",
        "_repeated",
        "_size",
        "_trailers",
        "_url",
        "deadline",
        "limits",
        "loop",
        "parser",
        "read_buffer",
        "too_large_hint",
    )  # thousands of idle connections: no per-instance dict
    transport: asyncio.Transport | None
    queue: list[Any]
    task: asyncio.Task[Any] | None
    peer: str | None

    def __init__(
        self,
        limits: HttpLimits,
        read_buffer: SharedReadBuffer,
        too_large_hint: str = "",
        budget: BufferBudget | None = None,
    ):
        super().__init__(budget or BufferBudget(limits.max_buffered_bytes))
        self.limits = limits
        self.read_buffer = read_buffer
        self.too_large_hint = too_large_hint  # appended to the 413 message, e.g. which option raises the limit
        self.parser = httptools.HttpRequestParser(self)
        self._phase = IDLE
        self._direct_keep_alive: int = True
        self._direct_method = b""
        self._head_bytes = 0  # bytes of the current head handed to the parser
        self._head_tail = b""  # its last `TAIL` bytes
        self._http10 = False  # the request being read is HTTP/1.0 (its keep-alive must be confirmed)
        # A chunked body, as `_chunk_stop` follows it:
        self._chunk_left = 0  # data bytes of the current chunk not yet handed to the parser; 0: framing
        self._crlf_due = False  # the CR LF closing a chunk's data is the next framing line (else a size line)
        self._trailers = False  # the last chunk's size line is past: the framing lines are trailer fields
        self._chunk_size = 0  # the size line's leading hex digits so far, as a number (at most 2**64)
        self._chunk_digits = True  # its leading hex digits may go on (in the next read)
        self._framing = 0  # bytes of framing since the last data
        self._refusal: tuple[int, str] | None = None
        self.loop = asyncio.get_running_loop()
        self._now = 0.0  # loop time of the read being parsed
        self.deadline = math.inf  # loop time past which the connection acts on what it waits for
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._headers: dict[str, str] = {}
        self._repeated: dict[str, list[str]] | None = None
        self._header_count = 0
        self._size = 0
        self._body_left = -1  # bytes of a Content-Length body the parser has still to see; -1: chunked

    def _refuse(self, status: int, message: str) -> None:
        raise NotImplementedError

    def _enqueue(self, item: HttpRequest | HttpResponse, keep_alive: int, charge: int = 0) -> None:
        raise NotImplementedError

    def _set_deadline(self, wait: int, seconds: float) -> None:
        raise NotImplementedError

    # ---- asyncio.BufferedProtocol --------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._phase == DIRECT:
            direct = self._direct
            assert direct is not None
            if direct.full:  # its growth is charged (`_settle_direct`)
                self._grow_direct()
            return direct.room()
        return self.read_buffer.view if self.budget.roomy else self.read_buffer.tight

    def buffer_updated(self, nbytes: int) -> None:
        self._now = self.loop.time()  # the deadlines this read starts count from it
        phase = self._phase
        if phase == BODY or phase == DIRECT:
            self._set_deadline(WAIT_BODY, self.limits.body_timeout_s)  # the body makes progress
        if phase == DIRECT:
            direct = self._direct
            assert direct is not None
            direct.received(nbytes)
            if direct.complete:
                self._direct_complete()
        elif phase != DONE:
            self._receive(nbytes)
        if self._phase == DIRECT:
            self._settle_direct()
        elif self._debt:
            self._settle()

    def _settle(self) -> None:
        """Bytes of a body were taken while memory is tight: stop reading until memory frees (with the rest of a
        small or chunked body reserved: at most the input limit)."""
        self._debt = False
        phase = self._phase
        if phase == DONE or not self.budget.tight:
            return
        need = 0
        if phase == BODY:
            bound = self._size + self._body_left if self._body_left >= 0 else self.limits.max_input_bytes + 1
            need = max(0, bound - self._body_charge)
        self._wait_for_memory(need)

    # ---- reading -----------------------------------------------------------------------------
    def _receive(self, end: int) -> None:
        """Hand the `end` bytes just read into the shared buffer to the parser: a head at most up to where it may end
        and to the limit, a Content-Length body exactly, a chunked body as `_feed_chunked` says, a large body into
        its own buffer."""
        data, view = self.read_buffer.data, self.read_buffer.view
        pos = 0
        while pos < end:
            phase = self._phase
            if phase == DIRECT:
                assert self._direct is not None
                pos += self._direct.add(view[pos:end])
                if self._direct.complete:
                    self._direct_complete()
                continue
            if phase == DONE:
                return
            if phase == BODY and self._body_left > 0:  # a Content-Length body: exactly its bytes
                stop = min(end, pos + self._body_left)
                if not self._parse(view[pos:stop]):
                    return
                pos = stop
                continue
            if phase == BODY:  # a chunked body
                pos = self._feed_chunked(data, view, pos, end)
                if pos < 0:
                    return
                continue
            # A head (IDLE: the bytes before it, the empty lines the parser skips, count too).
            stop = self._head_stop(data, pos, end)
            room = self.limits.max_header_bytes - self._head_bytes
            past_limit = stop - pos > room
            if past_limit:  # the parser sees the head up to the limit, and what it finds there first
                stop = pos + room
            self._head_bytes += stop - pos
            if not self._parse(view[pos:stop]):
                return
            if past_limit:  # (the head cannot end before `stop`: it goes on past the limit)
                self._refuse_head_size()
                return
            if self._phase == HEAD:  # the head goes on in the next read
                self._head_tail = (self._head_tail + bytes(view[max(pos, stop - TAIL) : stop]))[-TAIL:]
            else:
                self._head_tail = b""
            pos = stop

    def _feed_chunked(self, data: bytearray, view: memoryview, pos: int, end: int) -> int:
        """Feed data[pos:end] of a chunked body up to where `_chunk_stop` says; where it stopped, -1 when the request
        was refused."""
        stop, past_limit = self._chunk_stop(data, pos, end)
        if not self._parse(view[pos:stop]):
            return -1
        if past_limit:
            limit = self.limits.max_header_bytes
            self._refuse(431, f"request header fields too large: a chunk's size line, or the trailer fields, exceed "
                              f"{limit} bytes. Use --http-max-header-size to increase the limit.")
            return -1
        return stop

    def _chunk_stop(self, data: bytearray, pos: int, end: int) -> tuple[int, bool]:
        """Follow a chunked body's framing through data[pos:end] (the parser, fed up to the answer, judges it: a size
        line it takes begins with the chunk's size in hex; the CR LF closing a chunk's data is a line of its own):
        the chunks' data are skipped by their sizes, and the framing between two chunks' data, and after the last
        (the trailer fields), is held to the head limit. Where to stop feeding (the end of the read, the end of the
        last chunk's size line, of each trailer line, or the limit) and whether the framing passed the limit there:
        so the parser never sees a byte past the body's end, nor past the limit."""
        limit = self.limits.max_header_bytes
        scan = pos
        while scan < end:
            left = self._chunk_left
            if left > 0:  # a chunk's data
                stop = min(end, scan + left)
                self._chunk_left = left = left - (stop - scan)
                self._crlf_due, self._framing = left == 0, 0
                scan = stop
                continue
            found = data.find(b"\n", scan, end)
            line_end = end if found < 0 else found + 1
            room = limit - self._framing
            if line_end - scan > room:
                return scan + room, True
            self._framing += line_end - scan
            if self._trailers:  # a trailer line (the empty one ends the body): one at a time
                return line_end, False
            if self._crlf_due:
                self._crlf_due = found < 0
                scan = line_end
                continue
            if self._chunk_digits:  # a size line's leading hex digits, which may straddle reads
                match = CHUNK_SIZE.match(data, scan, line_end)
                digits = match[0] if match is not None else b""
                if digits:  # (past 2**64 it is not a size the parser takes: kept small)
                    self._chunk_size = min((self._chunk_size << 4 * len(digits)) | int(digits, 16), 1 << 64)
                self._chunk_digits = len(digits) == line_end - scan
            if found < 0:
                break
            size, self._chunk_size, self._chunk_digits = self._chunk_size, 0, True
            if size == 0:  # the last chunk: the trailer fields follow
                self._trailers = True
                return line_end, False
            self._chunk_left = size
            scan = line_end
        return end, False

    def _head_stop(self, data: bytearray, pos: int, end: int) -> int:
        """The first place within data[pos:end] where the head being read may end (just past a `HEAD_END`, which may
        begin in the previous read), else `end`."""
        tail = self._head_tail
        if tail:  # (`TAIL` bytes at most: a match found here takes at least one byte of this read)
            found = (tail + bytes(data[pos : min(pos + TAIL, end)])).find(HEAD_END)
            if found >= 0:
                return pos + found + len(HEAD_END) - len(tail)
        found = data.find(HEAD_END, pos, end)
        return end if found < 0 else found + len(HEAD_END)

    def _parse(self, data: memoryview) -> bool:
        """Feed the parser; False when the request was refused and nothing more is read."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "protocol upgrade is not supported")
        except httptools.HttpParserError as exc:
            if self._phase != DONE:  # else a callback refused the request already
                self._refuse(*(self._refusal or (400, f"malformed HTTP request: {exc}")))
        return self._phase != DONE

    def _head_size_refusal(self) -> tuple[int, str]:
        limit = self.limits.max_header_bytes
        return 431, (f"request header fields too large: the request line and headers exceed {limit} bytes. "
                     "Use --http-max-header-size to increase the limit.")

    def _too_large(self, size: str) -> tuple[int, str]:
        return 413, (f"request size of {size} bytes exceeds the maximum allowed input size of "
                     f"{self.limits.max_input_bytes} bytes.{self.too_large_hint}")

    def _refuse_head_size(self) -> None:
        self._refuse(*self._head_size_refusal())

    def _direct_complete(self) -> None:
        """The socket has filled a large body's buffer: the request is complete."""
        direct, self._direct = self._direct, None
        assert direct is not None
        # The parser still waits for the body it did not see: a fresh one reads the next request.
        self.parser = httptools.HttpRequestParser(self)
        self._phase = IDLE
        self.deadline = math.inf
        self._complete(direct.buffer, self._direct_keep_alive, self._direct_method, self._body_done(direct.length))

    # ---- httptools callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._reset()
        self._phase = HEAD
        self._set_deadline(WAIT_HEAD, self.limits.header_timeout_s)

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_header_count:
            limit = self.limits.max_header_count
            message = (f"request header fields too large: more than {limit} header fields. "
                       "Use --http-max-header-count to increase the limit.")
            self._refusal = (431, message)
            raise _Refused
        key = _names.get(name)
        if key is None:
            key = name.decode("latin-1").lower()
            if len(name) <= KEPT_MAX_BYTES:
                if len(_names) >= NAMES_KEPT:
                    _names.clear()
                _names[name] = key
        text = value.decode("latin-1")
        headers = self._headers
        if key not in headers:
            headers[key] = text
            return
        if self._repeated is None:
            self._repeated = {}
        self._repeated.setdefault(key, []).append(text)

    def on_headers_complete(self) -> None:
        version = self.parser.get_http_version()
        if version == "0.9":  # a request line without a version: not answered as HTTP/1.1
            self._refusal = (400, "malformed HTTP request: the request line has no HTTP version (HTTP/0.9 is not "
                                  "supported)")
            raise _Refused
        self._http10 = version == "1.0"
        headers = self._headers
        if self._repeated is not None:  # joined once: appending to a growing string per line is quadratic
            for key, values in self._repeated.items():
                headers[key] = ", ".join([headers[key], *values])
        self._head_bytes, self._head_tail = 0, b""
        self._chunk_left, self._crlf_due, self._trailers, self._framing = 0, False, False, 0
        self._chunk_size, self._chunk_digits = 0, True
        self._phase = BODY
        self._body_left = -1
        length = headers.get("content-length")
        if length is not None and length.isdigit() and "transfer-encoding" not in headers:
            size = self._body_left = int(length)
            if size > self.limits.max_input_bytes:  # refused now: its body is not read
                self._refusal = self._too_large(length)
                raise _Refused
            if size >= DIRECT_BODY_MIN:
                in_place = (  # a binary infer request: its tensors may be received into shared memory
                    "inference-header-content-length" in headers
                    and headers.get("content-encoding", "identity") == "identity"
                    and self._url.split(b"?", 1)[0].endswith(b"/infer")
                )
                json_size = headers.get("inference-header-content-length", "")
                self._start_direct(size, in_place, int(json_size) if in_place and json_size.isdigit() else 0)
                self._direct_keep_alive = self._persistence()
                self._direct_method = self.parser.get_method()
                self._phase = DIRECT
        self._set_deadline(WAIT_BODY, self.limits.body_timeout_s)
        # `Expect: 100-continue` (curl sends it for large bodies): say "go on" instead of letting the client wait
        # for its timeout (1 s in curl). Only when nothing is ahead of this request, so answers stay in order.
        if (
            headers.get("expect", "").lower() == "100-continue"
            and not self.queue
            and self.task is None
            and self.transport is not None
        ):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self._body_left > 0:
            self._body_left -= len(body)
        if self._direct is not None:  # only if a head ended where `_head_stop` did not see it
            self._direct.add(body)
            self._hold(len(self._direct.buffer))
            return
        self._size += len(body)
        if self._size > self.limits.max_input_bytes:  # a chunked body: refused at the chunk that passes the limit
            self._refusal = self._too_large(f"more than {self.limits.max_input_bytes}")
            raise _Refused
        self._body.append(body)
        self._hold(self._size)

    def on_message_complete(self) -> None:
        keep_alive: int = self.parser.should_keep_alive()  # (`_persistence` written out: once per request)
        if keep_alive and self._http10:
            keep_alive = KEEP_ALIVE_10
        self._phase = IDLE
        self.deadline = math.inf
        if self._direct is not None:  # the whole large body came through the parser
            body: Any = self._direct.buffer
            self._direct = None
        else:
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            if body:
                self._body = []
        self._complete(body, keep_alive, self.parser.get_method(), self._body_done(len(body)))

    def _persistence(self) -> int:
        """Whether the connection persists after this request's answer (messages.KEEP_ALIVE_10: an HTTP/1.0 client
        that asked for it, which the answer must confirm)."""
        keep_alive = self.parser.should_keep_alive()
        return KEEP_ALIVE_10 if keep_alive and self._http10 else keep_alive

    def _complete(self, body: Any, keep_alive: int, method: bytes, charge: int) -> None:
        """A request is read; `charge` is what its body is charged to the budget until the handler is done."""
        path, query = _target(self._url)
        request = HttpRequest(method.decode("ascii"), path, query, self._headers, body, self.peer)
        if self._http10:
            request.http10 = True
        self._enqueue(request, keep_alive, charge)
