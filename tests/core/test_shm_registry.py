"""The shared-memory registry: a region unregistered while requests hold it goes when the last one ends."""

from __future__ import annotations

import os
import uuid

import pytest

from pytriton.core.shm_registry import SharedMemoryRegistry, SystemShmRegion
from pytriton.exceptions import ServerError, Status


@pytest.fixture
def key():
    key = f"/pt_test_registry_{uuid.uuid4().hex[:8]}"
    fd = os.open("/dev/shm" + key, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
    yield key
    os.unlink("/dev/shm" + key)


def test_unregister_in_use_waits_for_the_last_user(key):
    registry = SharedMemoryRegistry()
    removed = []
    registry.on_removed.append(removed.append)
    region = registry.register_system("r", key, 0, 4096)
    registry.acquire([region])
    registry.unregister(SystemShmRegion, "r")
    registry.unregister(SystemShmRegion)  # again, and all: still fine
    assert registry.system_status() == [{"name": "r", "key": key, "offset": 0, "byte_size": 4096}]
    assert registry.system_status("r") == registry.system_status()
    with pytest.raises(ServerError) as info:
        registry.register_system("r", key, 0, 16)
    assert (info.value.status, info.value.message) == (Status.ALREADY_EXISTS, "shared memory region 'r' already in manager")
    assert registry.lookup("r", 0, 16) is region  # a new request may use it meanwhile
    registry.acquire([region])
    registry.release([region])
    assert removed == [] and len(registry) == 1
    registry.release([region])
    assert removed == [region] and registry.system_status() == []
    with pytest.raises(ServerError, match="Unable to find shared memory region: 'r'"):
        registry.lookup("r", 0, 16)
    registry.register_system("r", key, 0, 16)  # the name is free again


def test_unregister_unused_is_immediate(key):
    registry = SharedMemoryRegistry()
    removed = []
    registry.on_removed.append(removed.append)
    region = registry.register_system("r", key, 0, 4096)
    registry.unregister(SystemShmRegion, "r")
    assert removed == [region] and len(registry) == 0
    registry.unregister(SystemShmRegion, "never-registered")
