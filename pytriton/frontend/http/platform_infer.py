"""Inference as the SageMaker and Vertex AI endpoints run it: the KServe v2 body (JSON, or a JSON header and binary
tensors whose header size is given in the Content-Type), no compression either way."""

from __future__ import annotations

import re

from pytriton.exceptions import invalid_arg
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.infer_begin import answered, begin_infer, infer_headers
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response

SAGEMAKER_BINARY_MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VERTEX_AI_BINARY_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
_STOI = re.compile(r"\s*([+-]?\d+)")


def header_length_of(content_type: str | None, body_size: int, mime: str) -> int | None:
    """The JSON header's size from a Content-Type `<mime><size>` (None when the body is JSON only), with Triton's
    checks and messages; 0 means the whole body is the data of the model's single input."""
    if content_type is None:
        return None
    position = content_type.find(mime)
    if position < 0:
        return None
    if position != 0:
        raise invalid_arg(f"expect MIME type for binary data starts with '{mime}', got: {content_type}")
    text = content_type[len(mime):]
    match = _STOI.match(text)
    if match is None:
        raise invalid_arg(f"Unable to parse inference header size, got: {text}")
    value = int(match.group(1))
    if not -(2**31) <= value < 2**31:
        raise invalid_arg(f"Unable to parse inference header size, value is out of range, got: {text}")
    if value < 0 or value > body_size:
        raise invalid_arg(f"inference header size should be in range (0, {body_size}), got: {text}")
    return value


async def platform_infer(app: HttpApp, request: HttpRequest, name: str, version: str, mime: str,
                         binary_in_content_type: bool) -> HttpResponse:
    """Run an inference on `name` (`begin_infer`, awaited; headers are not forwarded, as in Triton); a binary answer
    names its JSON header size in the Content-Type (SageMaker) or, as the KServe route, in
    Inference-Header-Content-Length (Vertex AI). What the request or its call ends with is raised."""
    if request.method != "POST":
        return error_response(405, "Method Not Allowed")
    app.admission.enter(request)
    body = request.body
    header_length = header_length_of(request.headers.get("content-type"), len(body), mime)

    def headers(json_length: int | None) -> list[tuple[str, str]]:
        if json_length is not None and binary_in_content_type:
            return [("Content-Type", f"{mime}{json_length}")]
        return infer_headers(json_length)

    return await answered(begin_infer(app, request, name, version, body, header_length, forward=False,
                                      headers=headers, on_error=None))
