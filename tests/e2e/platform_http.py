"""Plain HTTP/1.1 requests as SageMaker and Vertex AI send them, and the platform ports of a `pytriton serve` log."""

from __future__ import annotations

import http.client
import json
import re
import struct

from tests._support.serving import ServerProcess

SAGEMAKER_MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VERTEX_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
_PORT = re.compile(r"Started (Sagemaker HTTPService|Vertex AI HTTPService) at [^:]+:(\d+)")


def platform_port(server: ServerProcess, service: str) -> int:
    """The port `service` ("Sagemaker HTTPService", "Vertex AI HTTPService") listens on, from the server's log."""
    for name, port in _PORT.findall(server.log):
        if name == service:
            return int(port)
    raise AssertionError(f"{service} did not start; log:\n{server.log}")


def request(port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
            ) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, lower-cased headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def add_sub_json(a: list[float], b: list[float]) -> bytes:
    """An add_sub request (INPUT0/INPUT1 FP32 [1, 4]) with its tensors in JSON."""
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": a},
                                  {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "data": b}]}).encode()


def add_sub_binary(a: list[float], b: list[float]) -> tuple[bytes, int]:
    """An add_sub request with binary tensors, OUTPUT0 asked for in binary and OUTPUT1 in JSON: (body, header size)."""
    header = json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}},
                   {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
    }).encode()
    return header + struct.pack("<4f", *a) + struct.pack("<4f", *b), len(header)


def split_binary(body: bytes, header_size: int) -> tuple[dict, bytes]:
    """A binary answer's JSON header and the bytes after it."""
    return json.loads(body[:header_size]), body[header_size:]
