"""Parsed JSON headers of binary infer requests, kept by the header's bytes (`HeaderCache`).

A client sends the same JSON header with every request of one shape (perf_analyzer, tritonclient in a loop): the
names, datatypes, shapes and `binary_data_size` of its inputs, its outputs and parameters. The first request with
a header is parsed and checked by `parse_infer_request`; what it found is kept (a `_Template`) and later requests
with the same header bytes only have their binary part cut by the sizes the header gave, with the same checks
and messages (a body shorter or longer than the sizes say). The template is also the request's `layout`, so the
core validates the header's names, datatypes and shapes against the model once per layout
(`core.validation.validate_layout`) and only the data each time.

Kept: headers of at most `MAX_HEADER_BYTES` whose inputs are all binary (no JSON `data`, no shared-memory region)
and whose outputs ask for neither a region nor classification. At most `MAX_ENTRIES` headers are kept; past that
the cache starts again empty (a client cycling through more headers than that parses each, as without a cache).
"""

from __future__ import annotations

from typing import Any

from pytriton.core.types import InferRequest, RequestedOutput, Tensor
from pytriton.exceptions import invalid_arg
from pytriton.frontend.http.infer import parse_infer_request

MAX_ENTRIES = 256
MAX_HEADER_BYTES = 4096


class _Template:
    """What one JSON header says; compared by identity (the core's `layout` key)."""

    __slots__ = ("request_id", "binary_default", "inputs", "outputs", "parameters")

    def __init__(self, request: InferRequest, binary_default: bool):
        self.request_id = request.id
        self.binary_default = binary_default
        self.inputs = tuple((t.name, t.datatype, t.shape, t.data.nbytes) for t in request.inputs)
        # (copies: the request's dicts are its own, e.g. forwarded headers join its parameters)
        self.outputs = tuple((o.name, dict(o.parameters)) for o in request.outputs)
        self.parameters = dict(request.parameters)


def _cacheable(request: InferRequest) -> bool:
    for tensor in request.inputs:
        if not isinstance(tensor.data, memoryview):  # JSON data (bytes) or a region (None)
            return False
    for output in request.outputs:
        parameters = output.parameters
        if "shared_memory_region" in parameters or "classification" in parameters:
            return False
    return True


class HeaderCache:
    """`parse_infer_request` for binary requests, with the parsed headers kept (bounded)."""

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = MAX_ENTRIES):
        self._entries: dict[bytes, _Template] = {}
        self.max_entries = max_entries

    def __len__(self) -> int:
        return len(self._entries)

    def parse(self, model_name: str, version: str, body: Any, header_length: int | None,
              raw_input: tuple[str, str, tuple[Any, ...]] | None) -> tuple[InferRequest, bool]:  # fmt: skip
        """As `parse_infer_request`: the request (with a `layout` when its header is kept) and whether outputs default
        to binary."""
        size = len(body)
        if header_length is None or header_length <= 0 or header_length > min(size, MAX_HEADER_BYTES):
            return parse_infer_request(model_name, version, body, header_length, raw_input)
        key = bytes(body[:header_length])
        template = self._entries.get(key)
        if template is None:
            request, binary_default = parse_infer_request(model_name, version, body, header_length, raw_input)
            if _cacheable(request):
                if len(self._entries) >= self.max_entries:
                    self._entries.clear()
                template = self._entries[key] = _Template(request, binary_default)
                request.layout = template
            return request, binary_default
        view = memoryview(body)
        binary_size = size - header_length
        offset = header_length
        inputs = []
        for name, datatype, shape, nbytes in template.inputs:
            used = offset - header_length
            if used + nbytes > binary_size:  # (`parse_infer_request`'s check and message)
                raise invalid_arg(
                    f"unexpected size for input '{name}', expecting {nbytes - (binary_size - used)} "
                    f"additional bytes for model '{model_name}'"
                )
            inputs.append(Tensor(name, datatype, shape, view[offset : offset + nbytes]))
            offset += nbytes
        if offset != size:
            raise invalid_arg(f"unexpected additional input data for model '{model_name}'")
        outputs = [RequestedOutput(name, dict(parameters) if parameters else {})
                   for name, parameters in template.outputs]
        parameters = template.parameters
        request = InferRequest(model_name, version, template.request_id, inputs, outputs,
                               dict(parameters) if parameters else {}, layout=template)
        return request, template.binary_default
