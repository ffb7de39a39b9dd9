"""Every Triton datatype round-trips bit-exactly through `tests.models:identity`, over gRPC and over HTTP (binary
tensor data), by every client path of the protocol: sync `infer`, `async_infer`, the gRPC stream, the asyncio
clients. Batching and non-batching models, zero-size and large tensors, and a server that puts every tensor into
shared memory (PYTRITON_INLINE_MAX_BYTES=0). What only one protocol has: tests/e2e/test_grpc_datatypes.py (typed
`InferTensorContents`), tests/e2e/test_http_datatypes.py (JSON, raw binary requests)."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.clients import PROTOCOLS, client_for, url_for
from tests._support.datatypes import CHECK, INPUTS, MODEL, PATHS, all_arrays, server_args
from tests._support.serving import lazy_servers, serve
from tests.models import ALL_DATATYPES

SERVERS = {
    "batching": ("tests.models:identity", server_args(8)),
    "plain": ("tests.models:identity", server_args(0)),
}
SHM_ONLY = {"PYTRITON_INLINE_MAX_BYTES": "0"}
PROTOCOL_PATHS = [pytest.param(protocol, path, id=f"{protocol}-{path}") for protocol in PROTOCOLS
                  for path in PATHS[protocol]]


def paths(*names: str) -> list:
    """`PROTOCOL_PATHS` limited to the client paths `names`."""
    return [p for p in PROTOCOL_PATHS if p.values[1] in names]


@pytest.fixture(scope="module")
def servers():
    """Servers of this module by name, each started the first time a test asks for it."""
    yield from lazy_servers(SERVERS)


@pytest.fixture(scope="module")
def shm_only_server():
    with serve("tests.models:identity", *server_args(0), env=SHM_ONLY) as server:
        yield server


def round_trip(server, protocol: str, path: str, arrays: dict[str, np.ndarray]) -> None:
    CHECK[protocol](PATHS[protocol][path](url_for(server, protocol), arrays), arrays)


@pytest.mark.parametrize("protocol, path", PROTOCOL_PATHS)
@pytest.mark.parametrize("batch", [1, 3])
def test_batching_model_round_trip(servers, protocol, path, batch):
    arrays = all_arrays(lambda dt: (batch, 7 + ALL_DATATYPES.index(dt)), seed=batch)
    round_trip(servers["batching"], protocol, path, arrays)


@pytest.mark.parametrize("protocol, path", PROTOCOL_PATHS)
def test_plain_model_round_trip(servers, protocol, path):
    arrays = all_arrays(lambda dt: (20 + ALL_DATATYPES.index(dt),), seed=7)
    round_trip(servers["plain"], protocol, path, arrays)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_plain_model_single_element(servers, protocol):
    arrays = all_arrays(lambda dt: (1,), seed=3)
    round_trip(servers["plain"], protocol, "infer", arrays)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_metadata_lists_every_datatype(servers, protocol):
    for name, lead in (("plain", []), ("batching", ["-1"])):
        client = client_for(servers[name], protocol)
        meta = client.get_model_metadata(MODEL, as_json=True) if protocol == "grpc" else client.get_model_metadata(
            MODEL)
        assert [i["datatype"] for i in meta["inputs"]] == ALL_DATATYPES
        assert [o["datatype"] for o in meta["outputs"]] == ALL_DATATYPES
        assert all([str(d) for d in i["shape"]] == lead + ["-1"] for i in meta["inputs"])
        client.close()
    client = client_for(servers["plain"], protocol)
    config = client.get_model_config(MODEL, as_json=True)["config"] if protocol == "grpc" else client.get_model_config(
        MODEL)
    client.close()
    assert [i["data_type"] for i in config["input"]] == [
        "TYPE_" + ("STRING" if dt == "BYTES" else dt) for dt in ALL_DATATYPES
    ]


# ---- zero-size and large tensors ------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol, path", PROTOCOL_PATHS)
def test_zero_size_plain(servers, protocol, path):
    arrays = all_arrays(lambda dt: (0,))
    round_trip(servers["plain"], protocol, path, arrays)


@pytest.mark.parametrize("protocol, path", paths("infer", "aio"))
@pytest.mark.parametrize("shape", [(2, 0), (0, 3)])
def test_zero_size_batching(servers, protocol, path, shape):
    arrays = all_arrays(lambda dt: shape)
    round_trip(servers["batching"], protocol, path, arrays)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_zero_size_next_to_data(servers, protocol):
    arrays = all_arrays(lambda dt: (0,) if ALL_DATATYPES.index(dt) % 2 else (5,), seed=11)
    round_trip(servers["plain"], protocol, "infer", arrays)


@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
@pytest.mark.parametrize("protocol, path", paths("infer", "aio"))
def test_large_tensor(servers, protocol, path):
    """8 MiB of FP32, 3 MiB of UINT8 and 1 MiB of BYTES next to small tensors: over the inline limit, so through
    shared memory."""
    big = {"FP32": (2 << 20,), "BYTES": (1 << 10,), "UINT8": (3 << 20,)}
    arrays = all_arrays(lambda dt: big.get(dt, (2,)), seed=5)
    arrays["BYTES"] = np.array([bytes([i % 256]) * 1024 for i in range(1024)], dtype=np.object_)
    round_trip(servers["plain"], protocol, path, arrays)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequential_requests_do_not_mix(servers, protocol):
    """Large and small requests one after another on one client must not see each other's bytes."""
    with client_for(servers["plain"], protocol) as client:
        for i in range(6):
            size = (1 << 18) if i % 2 else 3
            arrays = all_arrays(lambda dt, size=size, i=i: (size if dt != "BYTES" else 3 + i,), seed=100 + i)
            CHECK[protocol](client.infer(MODEL, INPUTS[protocol](arrays)), arrays)


# ---- every tensor in shared memory ----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol, path", PROTOCOL_PATHS)
def test_shm_only_server_round_trip(shm_only_server, protocol, path):
    arrays = all_arrays(lambda dt: (9 + ALL_DATATYPES.index(dt),), seed=13)
    round_trip(shm_only_server, protocol, path, arrays)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_shm_only_server_zero_size_and_large(shm_only_server, protocol):
    for shape_of in (lambda dt: (0,), lambda dt: (1 << 20,) if dt == "FP32" else (1,)):
        arrays = all_arrays(shape_of, seed=17)
        round_trip(shm_only_server, protocol, "infer", arrays)
