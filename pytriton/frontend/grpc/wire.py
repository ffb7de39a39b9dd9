"""Zero-copy (de)serialisation of ModelInfer messages.

Protobuf would copy every tensor several times (into its arena, out as a Python bytes object, again when
serialising). Here the request is split on the wire: the tensor payloads (`raw_input_contents`, field 7)
become memoryviews of the received buffer and only the small rest is parsed by protobuf. A response is written
the same way: the serialised header followed by `raw_output_contents` entries (field 6) straight from the output
buffers (`InferResponseWire`, `StreamResponseWire`), with what gives those buffers back once they are sent.
"""

from __future__ import annotations

from typing import Any, Callable

from tritonclient.grpc import service_pb2 as pb

_RAW_INPUT_FIELD = 7
_PARAMETERS_TAG = (4 << 3) | 2  # ModelInferRequest.parameters: one map entry per field
_ID_TAG = (3 << 3) | 2  # ModelInferRequest.id
_SCANNED_TAGS = frozenset((_PARAMETERS_TAG, _ID_TAG))
_SEQUENCE_KINDS = {  # the sequence parameters a scan reads itself, and the InferParameter kinds Triton takes for them
    b"sequence_id": (2, 3),  # int64_param (varint), string_param (bytes)
    b"sequence_start": (1,),  # bool_param (varint)
    b"sequence_end": (1,),
}
_MAX_TOP_FIELDS = 4096  # top-level fields scanned in Python before protobuf's parser takes over
_RAW_OUTPUT_TAG = bytes([(6 << 3) | 2])
_STREAM_RESPONSE_TAG = bytes([(2 << 3) | 2])
_ONE_BYTE = [bytes([value]) for value in range(0x80)]


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("malformed varint")


def encode_varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class RequestTemplate:
    """What a plain ModelInferRequest header says (no parameters anywhere, no `contents`, no id), for requests that
    repeat the same header bytes: its inputs' (name, datatype, shape) in order and its outputs' names."""

    __slots__ = ("model_name", "model_version", "inputs", "outputs")

    def __init__(self, model_name: str, model_version: str, inputs: tuple[tuple[str, str, tuple[int, ...]], ...],
                 outputs: tuple[str, ...]):  # fmt: skip
        self.model_name = model_name
        self.model_version = model_version
        self.inputs = inputs
        self.outputs = outputs


# Header bytes (a request without its raw_input_contents) -> their template; filled by the conversion
# (`_convert.to_infer_request`) the first time a plain header is seen, so that later requests skip protobuf.
TEMPLATES: dict[bytes, RequestTemplate] = {}
TEMPLATES_MAX = 256
TEMPLATE_HEAD_MAX = 4096  # longer headers get no template (the cache holds at most 1 MiB of header bytes)


# Map entries of sequence parameters already read (entry bytes -> (key, value)): a sequence repeats its id's entry in
# every request, and the START / END entries are the same few bytes for all.
_ENTRIES: dict[bytes, tuple[str, Any]] = {}
_ENTRIES_MAX = 4096
_ENTRY_MAX = 256  # longer entries (a long string id) are read each time (the cache holds at most 1 MiB)


def _sequence_parameters(entries: list[memoryview]) -> dict[str, Any] | None:
    """The request parameters of `entries` (ModelInferRequest.parameters map entries) when all are sequence parameters
    of a kind Triton accepts (sequence_id int64 or string, sequence_start / sequence_end bool), as protobuf would
    read them; else None (protobuf parses the request, and the conversion checks what it says)."""
    out: dict[str, Any] = {}
    for entry in entries:
        data = bytes(entry)
        known = _ENTRIES.get(data)
        if known is None:
            try:
                known = _read_entry(entry)
            except (IndexError, ValueError):
                known = None
            if known is None:
                return None
            if len(data) <= _ENTRY_MAX:
                if len(_ENTRIES) >= _ENTRIES_MAX:
                    _ENTRIES.clear()
                _ENTRIES[data] = known
        out[known[0]] = known[1]
    return out


def _read_entry(entry: memoryview) -> tuple[str, Any] | None:
    key = value = None
    pos, size = 0, len(entry)
    while pos < size:  # the entry: key = 1 (string), value = 2 (InferParameter)
        tag = entry[pos]
        if tag not in (0x0A, 0x12):
            return None
        length, pos = _varint(entry, pos + 1)
        if pos + length > size:
            return None
        if tag == 0x0A:
            key = bytes(entry[pos:pos + length])
        else:
            value = entry[pos:pos + length]
        pos += length
    kinds = _SEQUENCE_KINDS.get(key) if key is not None else None
    if kinds is None or value is None or not len(value):
        return None
    kind = value[0] >> 3
    if value[0] & 7 != (2 if kind == 3 else 0) or kind not in kinds:
        return None
    number, end = _varint(value, 1)
    number &= (1 << 64) - 1  # (as protobuf reads a varint of more than 64 bits)
    if end + (number if kind == 3 else 0) != len(value):  # (one field: a oneof set twice goes to protobuf)
        return None
    assert key is not None
    if kind == 3:
        try:
            return key.decode(), bytes(value[end:]).decode()
        except UnicodeDecodeError:
            return None
    if kind == 2:
        return key.decode(), number - (1 << 64) if number >= 1 << 63 else number
    return key.decode(), bool(number)


class InferRequestView:
    """A ModelInferRequest whose raw_input_contents are views of the received bytes (no copies).

    The protobuf header is parsed from `head` when first read; a request whose header bytes have a template is
    converted from it and usually never parsed. `template_key` is `head` without its id and its request parameters
    when those are only sequence parameters, both read by the scan (`request_id`, `sequence_parameters`): then the
    template of the rest of the header still serves (a client that numbers the requests of its sequences sends a
    new header each time). Else it is `head`, and `sequence_parameters` None."""

    __slots__ = ("_header", "head", "raw_input_contents", "template")
    template_key: bytes | None = None  # (see ScannedRequestView; None: `head`)
    sequence_parameters: dict[str, Any] | None = None
    request_id: str | None = None

    def __init__(self, header: Any, raw: list[memoryview], head: bytes | None = None,
                 template: RequestTemplate | None = None):  # fmt: skip
        self._header = header
        self.head = head
        self.raw_input_contents = raw
        self.template = template

    @property
    def id(self) -> str:
        return self.header.id if self.request_id is None else self.request_id

    @property
    def header(self) -> Any:
        if self._header is None:
            self._header = pb.ModelInferRequest.FromString(self.head or b"")
        return self._header

    @property
    def model_name(self) -> str:
        template = self.template
        return self.header.model_name if template is None else template.model_name

    @property
    def model_version(self) -> str:
        template = self.template
        return self.header.model_version if template is None else template.model_version

    def __getattr__(self, name: str) -> Any:
        return getattr(self.header, name)


class ScannedRequestView(InferRequestView):
    """An InferRequestView whose id and sequence parameters the scan read (see `InferRequestView`)."""

    __slots__ = ("template_key", "sequence_parameters", "request_id")

    def __init__(self, header: Any, raw: list[memoryview], head: bytes, template: RequestTemplate | None,
                 key: bytes, parameters: dict[str, Any] | None, request_id: str | None):  # fmt: skip
        super().__init__(header, raw, head, template)
        self.template_key = key
        self.sequence_parameters = parameters
        self.request_id = request_id  # the id, when the scan read it (and cut it out of `template_key`)


# The last plain header that had a template, as (its bytes, its template, its number of fields): clients put the header
# fields before the tensors (protobuf writes fields in order, raw_input_contents last) and repeat the same header, so
# a message that starts with these bytes and goes on with raw_input_contents fields only is read without the scan.
_last_plain: tuple[bytes, RequestTemplate, int] | None = None
_RAW_INPUT_TAG = (_RAW_INPUT_FIELD << 3) | 2


def _after_last_plain(data: Any) -> InferRequestView | None:
    """The request when `data` is the last plain header followed by raw_input_contents fields only; else None (then
    the scan reads it: it would find that header's fields, then these tensors, the same)."""
    last = _last_plain
    if last is None or type(data) is not bytes or not data.startswith(last[0]):
        return None
    head, template, fields = last
    if TEMPLATES.get(head) is not template:  # (forgotten since: the scan finds it again; the key's hash is kept)
        return None
    raw = _raw_inputs(memoryview(data), len(head), fields)
    return InferRequestView(None, raw, head, template) if raw else None


def _raw_inputs(view: memoryview, pos: int, fields: int) -> list[memoryview] | None:
    """The raw_input_contents fields from `pos` to the end of `view`, as views; None if anything else is there (or a
    field is cut, or the message would pass the scan's field limit with `fields` before them)."""
    size = len(view)
    raw: list[memoryview] = []
    try:
        while pos < size:
            if view[pos] != _RAW_INPUT_TAG or fields >= _MAX_TOP_FIELDS:
                return None
            length = view[pos + 1]
            if length < 0x80:
                pos += 2
            else:
                length, pos = _varint(view, pos + 1)
            end = pos + length
            if end > size:
                return None
            raw.append(view[pos:end])
            pos = end
            fields += 1
    except (IndexError, ValueError):
        return None
    return raw


# The last header the scan read with its id and sequence parameters cut out and a template (a client that numbers the
# requests of its sequences): its bytes before those fields and after them (contiguous), its template and template key,
# and its number of fields but those. A message that starts and goes on with these bytes around other such fields,
# then raw_input_contents only, is read without the scan (its parameters' entries through the cache of entries).
_last_scanned: tuple[bytes, bytes, RequestTemplate, bytes, int] | None = None


def _after_last_scanned(data: Any) -> InferRequestView | None:
    """The request when `data` is the last scanned header around other id / sequence parameter fields, followed by
    raw_input_contents fields only; else None (the scan reads it the same)."""
    last = _last_scanned
    if last is None or type(data) is not bytes or not data.startswith(last[0]):
        return None
    prefix, suffix, template, key, fields = last
    if TEMPLATES.get(key) is not template:
        return None
    view = memoryview(data)
    begin = pos = len(prefix)
    ident = None  # (protobuf takes the last)
    entries: list[memoryview] = []
    try:
        tag = view[pos]
        while tag == _ID_TAG or tag == _PARAMETERS_TAG:
            length = view[pos + 1]
            if length < 0x80:
                start = pos + 2
            else:
                length, start = _varint(view, pos + 1)
            pos = start + length
            if tag == _ID_TAG:
                ident = view[start:pos]
            else:
                entries.append(view[start:pos])
            fields += 1
            if fields > _MAX_TOP_FIELDS:  # (as the scan: protobuf's parser, in C, reads a message of that many)
                return None
            tag = view[pos]
        if pos == begin or not data.startswith(suffix, pos):
            return None
        head_end = pos + len(suffix)
    except (IndexError, ValueError):
        return None
    raw = _raw_inputs(view, head_end, fields)
    if not raw:
        return None
    parameters = _sequence_parameters(entries) if entries else None
    if entries and parameters is None:
        return None
    try:
        request_id = bytes(ident).decode() if ident is not None else ""
    except UnicodeDecodeError:
        return None
    return ScannedRequestView(None, raw, data[:head_end], template, key, parameters, request_id)


def parse_infer_request(data: bytes) -> InferRequestView:
    """Deserializer for ModelInfer/ModelStreamInfer requests."""
    global _last_plain, _last_scanned
    known = _after_last_plain(data)
    if known is None:
        known = _after_last_scanned(data)
    if known is not None:
        return known
    view = memoryview(data)
    size = len(view)
    pos = 0
    raw: list[memoryview] = []
    keep: list[memoryview] = []
    cut: list[int] | None = None  # indices in `keep` of the id and request parameters fields (scanned: see below)
    entries: list[memoryview] = []  # the request parameters' map entries
    ident = None  # the id (protobuf takes the last)
    fields = 0
    try:
        while pos < size:
            start = pos
            key = view[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(view, pos)
            fields += 1
            if key < 8 or fields > _MAX_TOP_FIELDS:
                # Field number 0 is never valid (a run of zero bytes would otherwise be read as millions of
                # fields, one Python iteration each); a real request has a handful of top-level fields. Either
                # way protobuf's own parser, in C, decides.
                raise ValueError("not a request this scanner reads")
            wire_type = key & 7
            if wire_type == 2:
                length = view[pos]
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = _varint(view, pos)
                end = pos + length
                if end > size:
                    raise ValueError("truncated field")
                if key >> 3 == _RAW_INPUT_FIELD:
                    raw.append(view[pos:end])
                else:
                    if key in _SCANNED_TAGS:
                        if cut is None:
                            cut = []
                        cut.append(len(keep))
                        if key == _ID_TAG:
                            ident = view[pos:end]
                        else:
                            entries.append(view[pos:end])
                    keep.append(view[start:end])
                pos = end
            elif wire_type == 0:
                _, pos = _varint(view, pos)
                keep.append(view[start:pos])
            elif wire_type == 1:
                pos += 8
                keep.append(view[start:pos])
            elif wire_type == 5:
                pos += 4
                keep.append(view[start:pos])
            else:
                raise ValueError(f"unsupported wire type {wire_type}")
    except (IndexError, ValueError):
        # Protobuf parses it (copying the tensors) or produces its own error for a malformed message.
        header = pb.ModelInferRequest.FromString(data)
        return InferRequestView(header, list(header.raw_input_contents))
    if not raw:
        return InferRequestView(pb.ModelInferRequest.FromString(data), [])
    head = b"".join(keep)
    if cut is None:  # (a plain header: its bytes are the key)
        template = TEMPLATES.get(head)
        if template is not None:
            _last_plain = (head, template, fields - len(raw))
            return InferRequestView(None, raw, head, template)
        return InferRequestView(pb.ModelInferRequest.FromString(head), raw, head)
    template_key = head
    parameters = request_id = None
    usable = True  # whether a template may serve: no parameters but sequence ones, an id that reads as text
    if entries:
        parameters = _sequence_parameters(entries)
        usable = parameters is not None
    if usable:
        try:
            request_id = bytes(ident).decode() if ident is not None else ""
        except UnicodeDecodeError:
            usable = False
    if usable:  # the key is the rest of the header
        template_key = b"".join([part for i, part in enumerate(keep) if i not in cut])
    template = TEMPLATES.get(template_key) if usable else None
    if template is not None:
        assert cut is not None
        if cut[-1] - cut[0] == len(cut) - 1:  # (the id and parameters together: the next such request skips the scan)
            _last_scanned = (b"".join(keep[:cut[0]]), b"".join(keep[cut[-1] + 1:]), template, template_key,
                             fields - len(raw) - len(cut))
        return ScannedRequestView(None, raw, head, template, template_key, parameters, request_id)
    return ScannedRequestView(pb.ModelInferRequest.FromString(head), raw, head, None, template_key, parameters,
                              request_id)

class InferResponseWire:
    """A ModelInferResponse as header + output buffers, and `on_sent`: the call that gives the output buffers back.

    The header is a protobuf message, or already serialised (`encoded`: parsed only if someone reads `header`).
    Whoever writes the response out calls `on_sent` exactly once, when it no longer needs the buffers: the HTTP/2
    transport when the socket has taken the bytes (or the call ended without them), the grpcio fallback right after
    its serializer joined them into one bytes object (`wire_bytes`).
    """

    __slots__ = ("_header", "_encoded", "parts", "on_sent")

    def __init__(self, header: Any, parts: list[Any], release: Callable[[], None] | None,
                 encoded: bytes | None = None):  # fmt: skip
        self._header = header
        self._encoded = encoded
        self.parts = parts
        self.on_sent = release

    @property
    def header(self) -> Any:
        if self._encoded is not None:
            self._header = pb.ModelInferResponse.FromString(self._encoded)
            self._encoded = None
        return self._header

    @property
    def parameters(self) -> Any:
        return self.header.parameters

    def chunks(self) -> list[Any]:
        encoded = self._encoded
        out: list[Any] = [self._header.SerializeToString() if encoded is None else encoded]
        for part in self.parts:
            size = part.nbytes if isinstance(part, memoryview) else len(part)
            out.append(_RAW_OUTPUT_TAG)
            out.append(encode_varint(size))
            if size:
                out.append(part)
        return out


class StreamResponseWire:
    """A ModelStreamInferResponse carrying an InferResponseWire."""

    __slots__ = ("response",)

    def __init__(self, response: InferResponseWire):
        self.response = response

    @property
    def on_sent(self) -> Callable[[], None] | None:
        return self.response.on_sent


def on_sent_of(response: Any) -> Callable[[], None] | None:
    """The release of a response's buffers (None for a response that owns none)."""
    if isinstance(response, (InferResponseWire, StreamResponseWire)):
        return response.on_sent
    return None


def release_unsent(response: Any) -> None:
    """A response that will never be written (its call ended first): its buffers go back now."""
    on_sent = on_sent_of(response)
    if on_sent is not None:
        on_sent()


def infer_response_chunks(response: Any) -> list[Any]:
    """A ModelInferResponse as the buffers that make up its serialised form (header, then tensors)."""
    if isinstance(response, InferResponseWire):
        return response.chunks()
    return [response.SerializeToString()]


def stream_response_chunks(response: Any) -> list[Any]:
    """A ModelStreamInferResponse as buffers: the infer_response field's tag and length, then its chunks."""
    if isinstance(response, StreamResponseWire):
        chunks = response.response.chunks()
        size = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks)
        return [_STREAM_RESPONSE_TAG, encode_varint(size), *chunks]
    return [response.SerializeToString()]


def wire_bytes(chunks: Callable[[Any], list[Any]], response: Any) -> bytes:
    """For grpc.aio, which wants one bytes object: the chunks joined, then the buffers released (the join copied
    them), whatever happens."""
    try:
        return b"".join(chunks(response))
    finally:
        release_unsent(response)
