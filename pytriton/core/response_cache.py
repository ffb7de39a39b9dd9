"""Triton's response cache (the `local` cache): a server-wide LRU of responses, bounded in bytes.

A model whose config enables `response_cache` (on a server started with `--cache-config local,size=BYTES`) has each
request looked up before it is scheduled: a hit is answered with a copy of the stored response and never reaches
an instance; a miss runs as usual and its successful response is stored. The key covers what a request's answer can
depend on: the model name and version (and which load of them: a model reloaded with other code never answers
from its predecessor's entries, which age out), every input's name, datatype, shape and bytes (read from the client's
shared-memory region where they lie there), the outputs requested with their parameters, and the request's own
parameters except those that only steer scheduling (priority, timeout). An entry counts the bytes of its outputs;
an entry larger than the whole cache is not stored. A miss whose inputs lie in a client's region is computed from the
bytes its key was taken of (a copy): a client overwriting its region meanwhile cannot store an answer under the key
of other bytes.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from pytriton.core.calls import answer
from pytriton.core.shm_registry import SystemShmRegion, shm_path
from pytriton.core.trace import REQUEST_END, REQUEST_START
from pytriton.core.types import ExecutionRequest, InferRequest, InferResponse, Tensor
from pytriton.exceptions import unavailable
from pytriton.scheduler.job import ExecutionStats

if TYPE_CHECKING:
    from pytriton.core.registry import Model
    from pytriton.core.server_core import ServerCore
    from pytriton.model_config.triton_model_config import TritonModelConfig

logger = logging.getLogger("pytriton.core")

# Request parameters that choose how a request is scheduled, not what it computes.
_SCHEDULING_PARAMETERS = frozenset(("priority", "timeout", "binary_data_output"))
# Requested-output parameters that choose the wire encoding only.
_ENCODING_PARAMETERS = frozenset(("binary_data",))


@dataclasses.dataclass(frozen=True)
class CachedResponse:
    """A stored response: its outputs as (name, datatype, shape, bytes) and its parameters."""

    outputs: tuple[tuple[str, str, tuple[int, ...], bytes], ...]
    parameters: tuple[tuple[str, Any], ...]

    @property
    def nbytes(self) -> int:
        return sum(len(data) for _, _, _, data in self.outputs)

    @classmethod
    def of(cls, outputs: list[Tensor], parameters: dict[str, Any]) -> CachedResponse:
        return cls(tuple((t.name, t.datatype, tuple(t.shape), bytes(t.data)) for t in outputs),
                   tuple(parameters.items()))

    def tensors(self) -> list[Tensor]:
        """Fresh tensors over the stored bytes (read-only; the entry may be evicted meanwhile, the bytes stay)."""
        return [Tensor(name, datatype, shape, memoryview(data)) for name, datatype, shape, data in self.outputs]


class ResponseCache:
    """An LRU of `CachedResponse`s by request key, holding at most `size` bytes of outputs."""

    def __init__(self, size: int):
        self.size = size
        self.used = 0
        self._entries: collections.OrderedDict[bytes, CachedResponse] = collections.OrderedDict()
        # what Triton's nv_cache_* summary gauges name (lookups = hits + misses; durations in ns)
        self.hits = self.misses = self.evictions = 0
        self.lookup_ns = self.insertion_ns = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: bytes) -> CachedResponse | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return entry

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    def insert(self, key: bytes, entry: CachedResponse) -> bool:
        """Store `entry` (the least recently used entries make room); False if the key is stored already or the
        entry is larger than the cache."""
        if key in self._entries:
            return False
        nbytes = entry.nbytes
        if nbytes > self.size:
            return False
        while self.used + nbytes > self.size:
            _, evicted = self._entries.popitem(last=False)
            self.used -= evicted.nbytes
            self.evictions += 1
        self._entries[key] = entry
        self.used += nbytes
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.used = 0


def model_cache(config: TritonModelConfig, cache: ResponseCache | None) -> ResponseCache | None:
    """The cache a model's responses go to: the server's, where the model's config enables `response_cache` (as
    Triton, a model enabling it on a server without a cache is served without one)."""
    if not config.response_cache:
        return None
    if cache is None:
        logger.warning("model '%s': response_cache is enabled but the server has no cache (--cache-config "
                       "local,size=BYTES): every request is computed", config.model_name)
    return cache


async def infer_cached(core: ServerCore, model: Model, cache: ResponseCache, request: InferRequest, internal: bool
                       ) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
    """`core.infer_with_stats` for a model whose responses are cached: a hit is answered here, a miss computed and
    stored. (Validation need not come first: an identical request was valid, or it was never stored.)"""
    start = time.perf_counter_ns()
    if not core.accepting and not internal:
        raise unavailable("Server not ready")
    execution, _ = core.execution_request(request)  # (a region error is the client's answer, as without a cache)
    read: dict[str, bytes] = {}
    key = request_key(model.name, model.version, request, execution, model.serial, read)
    if key is None:
        return await core.infer_with_stats(request, internal, cache=False)
    entry = cache.lookup(key)
    lookup_ns = time.perf_counter_ns() - start
    cache.lookup_ns += lookup_ns
    if entry is not None:
        trace = request.trace
        if trace is not None:
            trace.model_version = str(model.version)
            trace.stamp(REQUEST_START, start)
            trace.stamp(REQUEST_END)
        response = InferResponse(model.name, str(model.version), request.id, entry.tensors(), dict(entry.parameters))
        model.stats.record_cache_hit(time.perf_counter_ns() - start, lookup_ns)
        return response, ExecutionStats()
    if read:  # the model computes from the region bytes the key was taken of, not from what the client wrote since
        request = dataclasses.replace(request, inputs=[
            Tensor(t.name, t.datatype, t.shape, read[t.name]) if t.name in read else t for t in request.inputs])
    # As Triton, every lookup that found nothing is a miss, whatever comes of the request (an error response, one
    # written into a client's region, one an identical request stored meanwhile): hits + misses = lookups.
    call = core.begin(request, model, internal, cache=False)  # (a request refused here counts in no statistics)
    try:
        response, stats = await answer(call)
    except BaseException:
        model.stats.record_cache_miss(lookup_ns, answered=False)  # (nothing is stored: an error is never cached)
        raise
    insert_ns = 0
    if key not in cache and all(t.data is not None for t in response.outputs):  # (not those in a client's region)
        insert_start = time.perf_counter_ns()
        cache.insert(key, CachedResponse.of(response.outputs, response.parameters))
        insert_ns = time.perf_counter_ns() - insert_start
        cache.insertion_ns += insert_ns
    model.stats.record_cache_miss(lookup_ns + insert_ns)
    return response, stats


def request_key(name: str, version: int, request: InferRequest, execution: ExecutionRequest, serial: int = 0,
                read: dict[str, bytes] | None = None) -> bytes | None:  # fmt: skip
    """The cache key of a request to model `name` `version` (loaded as `serial`: see `Model.serial`), or None when its
    response is not cacheable here (an input in CUDA shared memory, an output to be written into a client's region).
    `read` receives the bytes read from client regions, by input name."""
    if execution.output_regions:
        return None
    digest = hashlib.blake2b(digest_size=32)

    def part(value: object) -> None:
        text = repr(value).encode()
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text)

    part((name, version, serial))
    for tensor in sorted(request.inputs, key=lambda t: t.name):
        part((tensor.name, tensor.datatype, tuple(tensor.shape)))
        data = tensor.data
        if data is None:
            where = execution.input_regions.get(tensor.name)
            if where is None or not isinstance(where.region, SystemShmRegion):
                return None
            try:
                data = _read_region(where.region, where.offset, where.byte_size)
            except OSError:  # (the scheduler reports what is wrong with the region)
                return None
            if read is not None:
                read[tensor.name] = data
        view = memoryview(data).cast("B")
        digest.update(view.nbytes.to_bytes(8, "little"))
        digest.update(view)
    part(sorted((o.name, sorted((k, repr(v)) for k, v in o.parameters.items() if k not in _ENCODING_PARAMETERS))
                for o in request.outputs))
    part(sorted((k, repr(v)) for k, v in request.parameters.items() if k not in _SCHEDULING_PARAMETERS))
    return digest.digest()


def _read_region(region: SystemShmRegion, offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of a client's system shared-memory region."""
    fd = os.open(shm_path(region.key), os.O_RDONLY)
    try:
        return os.pread(fd, size, region.offset + offset)
    finally:
        os.close(fd)


__all__ = ["CachedResponse", "ResponseCache", "infer_cached", "model_cache", "request_key"]
