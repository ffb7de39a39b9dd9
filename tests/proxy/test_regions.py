"""Worker-side client regions: a region is checked against its object's size now, before every use."""

from __future__ import annotations

import os
import uuid

import pytest

from pytriton.proxy.messages import TensorRef
from pytriton.proxy.regions import ClientRegions, RegionError


@pytest.fixture
def shm_object():
    """A 8 KiB POSIX shm object (key, fd); unlinked at the end."""
    key = f"/pt_test_regions_{uuid.uuid4().hex[:8]}"
    fd = os.open("/dev/shm" + key, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 8192)
    try:
        yield key, fd
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)


def ref(key: str, offset: int, nbytes: int, region_size: int = 8192) -> TensorRef:
    return TensorRef(name="X", region=key, region_size=region_size, region_id=1, offset=offset, nbytes=nbytes)


def test_view_is_checked_against_the_size_now(shm_object):
    key, fd = shm_object
    regions = ClientRegions()
    try:
        view = regions.system_view(ref(key, 4096, 4096))
        view[:4] = b"abcd"
        assert os.pread(fd, 4, 4096) == b"abcd"
        del view
        os.ftruncate(fd, 4096)
        with pytest.raises(RegionError) as info:
            regions.system_view(ref(key, 4096, 4096))
        assert str(info.value) == (
            f"shared memory region with key '{key}' is 4096 bytes now, too small for tensor 'X' at bytes "
            "4096..8192: it shrank after it was registered"
        )
        assert bytes(regions.system_view(ref(key, 0, 16))) == bytes(16)  # what is left can still be used
        os.ftruncate(fd, 8192)
        assert bytes(regions.system_view(ref(key, 4096, 4))) == bytes(4)  # grown back (zeros)
        with pytest.raises(RegionError, match="lies outside shared memory region"):
            regions.system_view(ref(key, 8190, 4))
    finally:
        regions.close()


def test_object_shrunk_before_it_is_first_mapped(shm_object):
    key, fd = shm_object
    os.ftruncate(fd, 100)
    regions = ClientRegions()
    with pytest.raises(RegionError) as info:
        regions.system_view(ref(key, 0, 16))
    assert str(info.value) == (
        f"shared memory region with key '{key}' is 100 bytes now, smaller than the 8192 bytes registered "
        "(offset + byte_size): it shrank after it was registered"
    )
    regions.close()


def test_vanished_object(shm_object):
    key, _ = shm_object
    with pytest.raises(RegionError, match="Unable to open shared memory region"):
        ClientRegions().system_view(ref(key + "_gone", 0, 16))
