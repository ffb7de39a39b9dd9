"""Raw HTTP/1.1 infer requests for the fast-route attacks (tests/abuse/test_http_fastroute_*.py): a binary infer
request built from a JSON header and its binary part, sent gzip-compressed with `Accept-Encoding: gzip` (the
reference: an inflated body's header is parsed in full, never kept) or as it is, where its header may be kept."""

from __future__ import annotations

import gzip
import json
import socket

import orjson

from tests._support.http_raw import read_response

__all__ = ["Answer", "ask", "both_routes", "header", "raw_request"]


def header(inputs: list[tuple[str, str, list[int], int]], binary_outputs: list[str] | None = None, **top) -> bytes:
    """A JSON infer header whose inputs (name, datatype, shape, binary_data_size) are all binary."""
    head: dict = {"inputs": [{"name": n, "datatype": d, "shape": s, "parameters": {"binary_data_size": b}}
                             for n, d, s, b in inputs]}
    if binary_outputs is not None:
        head["outputs"] = [{"name": name, "parameters": {"binary_data": True}} for name in binary_outputs]
    head.update(top)
    return orjson.dumps(head)


def raw_request(path: str, body: bytes, header_length: int | str | None, gzip_answer: bool = False,
                extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:  # fmt: skip
    if gzip_answer:
        body = gzip.compress(body)
    lines = b"POST %s %s\r\nHost: x\r\nContent-Length: %d\r\n" % (path.encode(), version, len(body))
    if header_length is not None:
        lines += b"Inference-Header-Content-Length: %s\r\n" % str(header_length).encode()
    if gzip_answer:
        lines += b"Accept-Encoding: gzip\r\nContent-Encoding: gzip\r\n"
    return lines + extra + b"\r\n" + body


class Answer(tuple):
    """(status, JSON part, binary part) of an infer answer, the body inflated where it was gzipped."""

    def __new__(cls, status: int, headers: dict[str, str], data: bytes):
        if headers.get("content-encoding") == "gzip":
            data = gzip.decompress(data)
        length = headers.get("inference-header-content-length")
        json_part, binary = (data, b"") if length is None else (data[: int(length)], data[int(length):])
        return super().__new__(cls, (status, json.loads(json_part) if json_part else None, binary))

    @property
    def status(self) -> int:
        return self[0]

    @property
    def json(self):
        return self[1]

    @property
    def binary(self) -> bytes:
        return self[2]


def ask(sock: socket.socket, buffer: bytearray, path: str, body: bytes, header_length: int | str | None,
        gzip_answer: bool = False, extra: bytes = b"") -> Answer:  # fmt: skip
    sock.sendall(raw_request(path, body, header_length, gzip_answer, extra))
    return Answer(*read_response(sock, buffer))


def both_routes(sock: socket.socket, buffer: bytearray, path: str, body: bytes, header_length: int | str | None,
                extra: bytes = b"") -> Answer:  # fmt: skip
    """The answer with the header as kept, asserted equal to the answer with it parsed in full (asked second: the
    kept header, if any, was made by an earlier request)."""
    fast = ask(sock, buffer, path, body, header_length, False, extra)
    slow = ask(sock, buffer, path, body, header_length, True, extra)
    assert fast == slow, (fast, slow)
    return fast
