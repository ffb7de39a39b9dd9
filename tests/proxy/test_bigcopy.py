"""Large outputs copied by several threads (pytriton/proxy/bigcopy.py): every byte lands once, in place, for any
dtype, size and layout; the worker endpoint uses it for client regions and its arena; its threads end with it."""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
import threading
import uuid

import numpy as np
import pytest
import zmq

from pytriton.proxy import bigcopy
from pytriton.proxy.arena import SegmentMap
from pytriton.proxy.bigcopy import OutputCopier, copy_threads, default_threads
from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.messages import TensorRef, WorkerToServer

KIB = 1024
THRESHOLD = 64 * KIB
GUARD = 4096 + 7  # bytes either side of a destination that no copy may touch


def _copy_threads_alive(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def _source(nbytes: int, dtype: np.dtype, seed: int) -> np.ndarray:
    """A 1-D array of about `nbytes` bytes with varied contents (bool: both values; floats: no NaN)."""
    rng = np.random.default_rng(seed)
    count = max(1, nbytes // dtype.itemsize)
    if dtype == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    raw = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8).view(dtype)
    if dtype.kind == "f":
        raw = np.where(np.isfinite(raw), raw, 1).astype(dtype)
    return raw


def _guarded(src: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(a buffer filled with 0xA5, a destination view of src's shape and dtype `offset` bytes into it)."""
    buffer = np.full(offset + src.nbytes + GUARD, 0xA5, dtype=np.uint8)
    dst = np.frombuffer(buffer, dtype=src.dtype, count=src.size, offset=offset).reshape(src.shape)
    return buffer, dst


def _check(buffer: np.ndarray, dst: np.ndarray, src: np.ndarray, offset: int) -> None:
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()
    assert (buffer[:offset] == 0xA5).all() and (buffer[offset + src.nbytes:] == 0xA5).all()


@pytest.fixture
def copier():
    with OutputCopier(threads=3, threshold=THRESHOLD, name="test-copy") as copier:
        yield copier
    assert not _copy_threads_alive("test-copy")


# Sizes around the threshold, around page-multiple chunk boundaries (3 threads: a size of 3 pages splits evenly,
# one more byte or element does not), and sizes that leave the last chunk short or empty.
SIZES = [THRESHOLD - 8, THRESHOLD, THRESHOLD + 8, 3 * 4096 * 6, 3 * 4096 * 6 + 8, 3 * 4096 * 6 - 8, 1 << 20, (1 << 20) + 24]
DTYPES = [np.dtype(t) for t in ("bool", "uint8", "float16", "float32", "int64", "complex128")]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nbytes", SIZES)
def test_contiguous_copies_are_exact_and_stay_inside_their_destination(copier, nbytes, dtype):
    src = _source(nbytes, dtype, nbytes)
    for offset in (0, 8, 4096 + 16):  # a destination at an offset into a region (page-aligned or not)
        buffer, dst = _guarded(src, offset)
        copier.copy(dst, src)
        _check(buffer, dst, src, offset)
    assert len(copier.pool) == (2 if src.nbytes >= THRESHOLD else 0)


def test_a_batched_output_with_one_row_is_split_too(copier):
    src = _source(1 << 20, np.dtype("float32"), 1).reshape(1, -1)  # what @batch returns for a batch of one
    buffer, dst = _guarded(src, 64)
    copier.copy(dst, src)
    _check(buffer, dst, src, 64)
    assert len(copier.pool) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.reshape(512, 512).T,  # transposed
        lambda a: a.reshape(512, 512)[:, ::2],  # every other column
        lambda a: a[::3],  # strided 1-D
        lambda a: a.reshape(1, 2, -1)[:, :, 1:],  # short leading axes, split along the last
        lambda a: a.reshape(2, 1, -1)[::-1],  # reversed, a leading axis shorter than the thread count
        lambda a: np.broadcast_to(a[:1024], (256, 1024)),  # a zero stride
    ],
    ids=["transposed", "columns", "strided", "short-axes", "reversed", "broadcast"],
)
@pytest.mark.parametrize("dtype", [np.dtype("float32"), np.dtype("bool"), np.dtype("int64")], ids=str)
def test_non_contiguous_outputs_are_copied_exactly(copier, make, dtype):
    base = _source(512 * 512 * dtype.itemsize, dtype, 7)
    src = make(base)
    assert not src.flags.c_contiguous
    buffer, dst = _guarded(src, 24)
    copier.copy(dst, src)
    _check(buffer, dst, src, 24)


def test_small_outputs_and_the_off_switch_use_no_thread():
    src = _source(1 << 20, np.dtype("float32"), 3)
    with OutputCopier(threads=1, threshold=THRESHOLD, name="test-off") as off:
        buffer, dst = _guarded(src, 0)
        off.copy(dst, src)
        _check(buffer, dst, src, 0)
        assert off.pool == [] and not _copy_threads_alive("test-off")
    with OutputCopier(threads=4, threshold=4 << 20, name="test-small") as small:
        small.copy(dst, src)  # 1 MiB < 4 MiB
        assert small.pool == [] and not _copy_threads_alive("test-small")


def test_an_error_in_the_copy_is_raised_after_every_chunk_is_done_and_the_pool_goes_on(copier):
    src = _source(1 << 20, np.dtype("float32"), 5)
    _, dst = _guarded(src, 0)
    dst.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        copier.copy(dst, src)
    buffer, dst = _guarded(src, 0)
    copier.copy(dst, src)
    _check(buffer, dst, src, 0)
    with pytest.raises(ValueError):
        copier.copy(dst[:-1], src)  # (shapes differ: refused, as np.copyto refuses them)


def test_close_stops_and_joins_the_pool_and_later_copies_still_work():
    copier = OutputCopier(threads=4, threshold=THRESHOLD, name="test-close")
    assert not _copy_threads_alive("test-close")  # created lazily
    src = _source(1 << 20, np.dtype("int64"), 9)
    buffer, dst = _guarded(src, 0)
    copier.copy(dst, src)
    assert sorted(t.name for t in _copy_threads_alive("test-close")) == ["test-close-1", "test-close-2", "test-close-3"]
    assert all(t.daemon for t in copier.pool)
    copier.close()
    assert not _copy_threads_alive("test-close") and copier.pool == []
    buffer, dst = _guarded(src, 8)
    copier.copy(dst, src)
    _check(buffer, dst, src, 8)
    assert not _copy_threads_alive("test-close")


def test_concurrent_callers_share_the_pool(copier):
    sources = [_source((1 << 20) + 8 * i, np.dtype("float32"), i) for i in range(4)]
    targets = [_guarded(src, 16) for src in sources]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            for _ in range(20):
                copier.copy(targets[i][1], sources[i])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for (buffer, dst), src in zip(targets, sources):
        _check(buffer, dst, src, 16)


def test_thread_count_from_the_environment(caplog):
    cpus = len(os.sched_getaffinity(0))
    assert default_threads() == min(4, cpus)
    assert copy_threads({}) == min(4, cpus)
    assert copy_threads({"PYTRITON_OUTPUT_COPY_THREADS": "1"}) == 1
    assert copy_threads({"PYTRITON_OUTPUT_COPY_THREADS": " 6 "}) == 6
    with caplog.at_level(logging.WARNING, logger="pytriton.proxy"):
        assert copy_threads({"PYTRITON_OUTPUT_COPY_THREADS": "0"}) == min(4, cpus)
        assert copy_threads({"PYTRITON_OUTPUT_COPY_THREADS": "many"}) == min(4, cpus)
    assert [r.getMessage() for r in caplog.records] == [
        f"PYTRITON_OUTPUT_COPY_THREADS='0': expected an integer >= 1; using {min(4, cpus)}",
        f"PYTRITON_OUTPUT_COPY_THREADS='many': expected an integer >= 1; using {min(4, cpus)}",
    ]


# ---- the worker endpoint ------------------------------------------------------------------------------------------
@pytest.fixture
def pair():
    """A bare ROUTER standing in for the server and a WorkerEndpoint (copy threshold 64 KiB, 3 threads) after HELLO."""
    directory = tempfile.TemporaryDirectory()
    address = f"ipc://{os.path.join(directory.name, 'r.ipc')}"
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(address)
    identity = b"w-" + secrets.token_hex(4).encode()
    endpoint = WorkerEndpoint(address, identity, "t" + secrets.token_hex(4), os.getpid(), context=ctx)
    endpoint.copier.close()
    endpoint.copier = OutputCopier(threads=3, threshold=THRESHOLD, name="test-endpoint-copy")
    endpoint.send_hello()
    assert router.recv_multipart()[0] == identity
    try:
        yield endpoint, router
    finally:
        endpoint.close()
        assert not _copy_threads_alive("test-endpoint-copy")
        router.close()
        ctx.term()
        directory.cleanup()


@pytest.fixture
def region():
    """A 4 MiB POSIX shm object standing in for a client's registered region: (key, fd); unlinked at the end."""
    key = f"/pt_test_bigcopy_{uuid.uuid4().hex[:8]}"
    fd = os.open("/dev/shm" + key, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 4 << 20)
    try:
        yield key, fd
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)


def _result(router) -> tuple[WorkerToServer, list[bytes]]:
    frames = router.recv_multipart()
    return WorkerToServer.FromString(frames[1]), frames[2:]


OUTPUTS = [
    ("OUT_FP16", "FP16", lambda: _source(300 * KIB, np.dtype("float16"), 1).reshape(2, -1)),
    ("OUT_BOOL", "BOOL", lambda: _source(200 * KIB + 3, np.dtype("bool"), 2)),
    ("OUT_INT64", "INT64", lambda: _source(512 * KIB, np.dtype("int64"), 3).reshape(256, -1).T),  # a view
    ("OUT_FP32", "FP32", lambda: _source(1 << 20, np.dtype("float32"), 4).reshape(1, -1)),
]


def test_outputs_written_into_a_client_region_at_offsets(pair, region):
    endpoint, router = pair
    key, fd = region
    outputs = [(name, datatype, make()) for name, datatype, make in OUTPUTS]
    regions, offset = {}, 8
    for index, (name, _, array) in enumerate(outputs):
        regions[name] = TensorRef(name=name, region=key, region_size=4 << 20, region_id=1, offset=offset,
                                  nbytes=array.nbytes + 16)
        offset += array.nbytes + 16 + 8 * index
    os.pwrite(fd, b"\xa5" * (4 << 20), 0)
    assert endpoint.send_result(1, [(outputs, "", {})], [regions]) == 0  # nothing held by the server
    message, frames = _result(router)
    assert not message.error and not message.responses[0].error and frames == []
    for ref, (name, _, array) in zip(message.responses[0].outputs, outputs):
        assert (ref.name, ref.region, ref.offset, ref.nbytes) == (name, key, regions[name].offset, array.nbytes)
        assert os.pread(fd, array.nbytes, ref.offset) == np.ascontiguousarray(array).tobytes()
        after = ref.offset + array.nbytes
        assert os.pread(fd, 16, after) == b"\xa5" * 16  # the rest of the registered bytes are untouched
    assert len(endpoint.copier.pool) == 2


def test_outputs_written_into_the_arena(pair):
    endpoint, router = pair
    outputs = [(name, datatype, make()) for name, datatype, make in OUTPUTS]
    held = endpoint.send_result(2, [(outputs, "", {})])
    message, frames = _result(router)
    assert frames == [] and held == sum(array.nbytes for _, _, array in outputs)
    server_side = SegmentMap(endpoint.arena.tag, os.getpid(), endpoint.arena.kind)  # as the server reads them
    for ref, (name, _, array) in zip(message.responses[0].outputs, outputs):
        assert ref.name == name and not ref.region and ref.nbytes == array.nbytes
        assert bytes(server_side.view(ref.segment, ref.offset, ref.nbytes)) == np.ascontiguousarray(array).tobytes()
    server_side.close()
    assert len(endpoint.copier.pool) == 2


def test_a_region_too_small_keeps_its_error_and_the_other_requests_are_answered(pair, region):
    endpoint, router = pair
    key, fd = region
    big = _source(1 << 20, np.dtype("float32"), 6)
    small = TensorRef(name="OUT", region=key, region_size=4 << 20, region_id=1, offset=0, nbytes=big.nbytes - 4)
    fits = TensorRef(name="OUT", region=key, region_size=4 << 20, region_id=1, offset=2 << 20, nbytes=big.nbytes)
    endpoint.send_result(3, [([("OUT", "FP32", big)], "", {}), ([("OUT", "FP32", big)], "", {})],
                         [{"OUT": small}, {"OUT": fits}])
    message, _ = _result(router)
    assert message.responses[0].error == (
        f"shared memory size specified with the request for output 'OUT' ({big.nbytes - 4} bytes) should be at least "
        f"{big.nbytes} bytes to hold the results"
    )
    assert not message.responses[1].error
    assert os.pread(fd, big.nbytes, 2 << 20) == big.tobytes()


def test_a_region_that_shrank_keeps_its_error(pair, region):
    endpoint, router = pair
    key, fd = region
    big = _source(1 << 20, np.dtype("float32"), 8)
    ref = TensorRef(name="OUT", region=key, region_size=4 << 20, region_id=1, offset=0, nbytes=big.nbytes)
    endpoint.send_result(4, [([("OUT", "FP32", big)], "", {})], [{"OUT": ref}])  # mapped now
    _result(router)
    os.ftruncate(fd, 4096)
    endpoint.send_result(5, [([("OUT", "FP32", big)], "", {})], [{"OUT": ref}])
    message, _ = _result(router)
    assert message.responses[0].error == (
        f"shared memory region with key '{key}' is 4096 bytes now, too small for tensor 'OUT' at bytes "
        f"0..{big.nbytes}: it shrank after it was registered"
    )


@pytest.mark.parametrize("count", [2, 3, 4])
@pytest.mark.parametrize("nbytes", [THRESHOLD, 3 * 4096 * 6 + 8, (1 << 20) + 24, 16 << 20])
def test_contiguous_chunks_are_at_most_one_per_thread_and_start_on_pages(count, nbytes):
    src = np.zeros(nbytes // 8, dtype=np.int64)
    dst = np.empty_like(src)
    pairs = bigcopy._chunks(dst, src, count)
    assert pairs is not None and 2 <= len(pairs) <= count
    starts = [(d.ctypes.data - dst.ctypes.data, s.ctypes.data - src.ctypes.data) for d, s in pairs]
    assert all(a == b and a % 4096 == 0 for a, b in starts)
    assert [a for a, _ in starts] == sorted(a for a, _ in starts)
    assert sum(d.nbytes for d, _ in pairs) == src.nbytes and all(d.shape == s.shape for d, s in pairs)


def test_a_pool_thread_that_is_busy_elsewhere_does_not_hold_the_copy_up():
    """The caller takes every chunk nobody has taken: with the only pool thread stuck, the copy still ends."""
    with OutputCopier(threads=2, threshold=THRESHOLD, name="test-stuck") as copier:
        src = _source(8 << 20, np.dtype("float32"), 11)
        buffer, dst = _guarded(src, 0)
        copier.copy(dst, src)  # (starts the pool)
        release, stuck = threading.Event(), threading.Event()

        class Blocker:
            def run(self) -> None:
                stuck.set()
                release.wait(60)

        copier._tasks.put(Blocker())
        assert stuck.wait(10)
        buffer, dst = _guarded(src, 16)
        done = threading.Thread(target=copier.copy, args=(dst, src))
        done.start()
        done.join(30)
        stuck_alive = done.is_alive()
        release.set()
        done.join(30)
        assert not stuck_alive
        _check(buffer, dst, src, 16)
