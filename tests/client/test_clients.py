"""pytriton.client against real `pytriton serve` processes, over gRPC and HTTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from pytriton.client import (
    AsyncioDecoupledModelClient,
    AsyncioModelClient,
    DecoupledModelClient,
    FuturesModelClient,
    ModelClient,
)
from pytriton.client.auth import create_auth_headers, extract_access_token_from_headers
from pytriton.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton.client.utils import (
    ModelState,
    TritonUrl,
    create_client_from_url,
    get_model_config,
    get_model_state,
    wait_for_model_ready,
    wait_for_server_ready,
)
from pytriton.client.warnings import NotSupportedTimeoutWarning, PyTritonWarning
from pytriton.model_config.triton_model_config import TritonModelConfig
from tests._support.paths import REPO
from tests._support.serving import lazy_servers, tensor_args

TOKEN = "s3cr3t-token"
FORWARD = ["--http-header-forward-pattern", "x-.*", "--grpc-header-forward-pattern", "x-.*"]
IDENTITY_TENSORS = (
    tensor_args("input", [("IN_F", "fp32", "-1"), ("IN_S", "bytes", "-1")])
    + tensor_args("output", [("OUT_F", "fp32", "-1"), ("OUT_S", "bytes", "-1")])
)
SLOW = tensor_args("input", [("X", "int32", "1")]) + tensor_args("output", [("PID", "int64", "1")])
COUNTDOWN = tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args("output", [("VALUE", "int32", "1")])


def _restricted(groups: str) -> list[str]:
    return [
        "--http-restricted-api", f"{groups}:triton-access-token={TOKEN}",
        "--grpc-restricted-protocol", f"{groups}:triton-access-token={TOKEN}",
    ]


SERVERS: dict[str, tuple[str, list[str]]] = {
    "add_sub": (
        "tests.models:add_sub",
        ["--max-batch-size", "8"]
        + tensor_args("input", [("INPUT0", "fp32", "-1"), ("INPUT1", "fp32", "-1")])
        + tensor_args("output", [("OUTPUT0", "fp32", "-1"), ("OUTPUT1", "fp32", "-1")]),
    ),
    "identity": ("tests.models:identity", ["--max-batch-size", "0"] + IDENTITY_TENSORS),
    "identity_batching": (
        "tests.models:identity", ["--model-name", "identity_batching", "--max-batch-size", "4"] + IDENTITY_TENSORS
    ),
    "echo": (
        "tests.models:echo_parameters",
        tensor_args("input", [("INPUT", "fp32", "4"), ("TEXT", "bytes", "2")])
        + tensor_args("output", [("PARAMS", "bytes", "1")]) + FORWARD,
    ),
    "raises": (
        "tests.models:raises",
        tensor_args("input", [("X", "fp32", "4")]) + tensor_args("output", [("OUTPUT", "fp32", "4")]),
    ),
    # for timeouts (a cancelled request may keep its worker busy for a while)
    "no_inputs": ("tests.cli_targets.declared:no_inputs", []),  # declared with inputs=[]
    "slow": ("tests.models:slow_pid", ["--instances", "2"] + SLOW),
    # for concurrency: nothing here is ever cancelled
    "slow_pool": ("tests.models:slow_pid", ["--model-name", "slow_pool", "--instances", "2"] + SLOW),
    "restricted": ("tests.models:identity", IDENTITY_TENSORS + _restricted("inference")),
    "restricted_all": (
        "tests.models:identity",
        ["--model-name", "identity_all", "--max-batch-size", "4"]
        + IDENTITY_TENSORS
        + _restricted("health,metadata,model-config,inference,model-repository"),
    ),
    "countdown": ("tests.models:countdown", ["--decoupled"] + COUNTDOWN),
    "batched_countdown": (
        "tests.client.models:batched_countdown", ["--decoupled", "--max-batch-size", "4"] + COUNTDOWN
    ),
    "fail_stream": ("tests.client.models:countdown_then_fail", ["--decoupled"] + COUNTDOWN),
    "stream_params": (
        "tests.client.models:stream_parameters",
        ["--decoupled"] + tensor_args("input", [("X", "int32", "1")])
        + tensor_args("output", [("PARAMS", "bytes", "1")]) + FORWARD,
    ),
}


def _serve_supports_decoupled() -> bool:
    try:
        help_text = subprocess.run(
            [sys.executable, "-m", "pytriton.cli", "serve", "--help"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--decoupled" in help_text


needs_decoupled = pytest.mark.skipif(
    not _serve_supports_decoupled(), reason="`pytriton serve` lacks --decoupled"
)


@pytest.fixture(scope="module")
def servers():
    """Servers of this module by name, each started the first time a test asks for it."""
    yield from lazy_servers(SERVERS)


def url_of(server, form: str) -> str:
    """The three url forms: grpc://host:port, http://host:port and host:port (http by default)."""
    return {"grpc": f"grpc://{server.grpc_url}", "http": f"http://{server.http_url}", "bare": server.http_url}[form]


URL_FORMS = ["grpc", "http", "bare"]
PROTOCOLS = ["grpc", "http"]


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


# ---- utils, auth, exceptions (no server) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("localhost", ("http", "localhost", 8000)),
        ("localhost:1234", ("http", "localhost", 1234)),
        ("http://localhost", ("http", "localhost", 8000)),
        ("grpc://localhost", ("grpc", "localhost", 8001)),
        ("GRPC://example.com:9001", ("grpc", "example.com", 9001)),
        ("127.0.0.1:8001", ("http", "127.0.0.1", 8001)),
        ("grpc://[::1]:8001", ("grpc", "::1", 8001)),
    ],
)
def test_triton_url_parsing(url, expected):
    parsed = TritonUrl.from_url(url)
    assert (parsed.scheme, parsed.hostname, parsed.port) == expected
    host = f"[{expected[1]}]" if ":" in expected[1] else expected[1]
    assert parsed.without_scheme == f"{host}:{expected[2]}"
    assert parsed.with_scheme == f"{expected[0]}://{host}:{expected[2]}"
    assert TritonUrl.from_url(parsed.with_scheme) == parsed


@pytest.mark.parametrize("url", ["ftp://localhost", "https://localhost", "grpc://", "localhost:notaport", 8000, ""])
def test_invalid_urls(url):
    with pytest.raises(PyTritonClientInvalidUrlError):
        TritonUrl.from_url(url)
    with pytest.raises(PyTritonClientValueError):  # InvalidUrlError is a ValueError of the client
        ModelClient(url, "model")


def test_auth_headers():
    assert create_auth_headers(TOKEN, "http") == {"triton-access-token": TOKEN}
    assert create_auth_headers(TOKEN, "grpc") == {"triton-grpc-protocol-triton-access-token": TOKEN}
    assert create_auth_headers(None, "grpc") == {}
    with pytest.raises(PyTritonClientValueError):
        create_auth_headers(TOKEN, "ftp")
    assert extract_access_token_from_headers({"triton-access-token": "a"}) == "a"
    assert extract_access_token_from_headers({"Triton-GRPC-Protocol-Triton-Access-Token": "b"}) == "b"
    assert extract_access_token_from_headers({"other": "c"}) is None
    assert extract_access_token_from_headers(None) is None


def test_exceptions_and_warnings():
    error = PyTritonClientInferenceServerError("boom")
    assert error.message == "boom" and str(error) == "boom"
    assert issubclass(PyTritonClientInvalidUrlError, PyTritonClientValueError)
    for cls in (PyTritonClientValueError, PyTritonClientTimeoutError, PyTritonClientModelUnavailableError,
                PyTritonClientClosedError, PyTritonClientModelDoesntSupportBatchingError,
                PyTritonClientInferenceServerError, PyTritonClientQueueFullError):
        assert issubclass(cls, PyTritonClientError)
    assert issubclass(NotSupportedTimeoutWarning, PyTritonWarning) and issubclass(PyTritonWarning, UserWarning)


def test_decoupled_clients_refuse_http():
    with pytest.raises(PyTritonClientValueError):
        DecoupledModelClient("http://localhost:8000", "model")
    with pytest.raises(PyTritonClientValueError):
        DecoupledModelClient("localhost:8000", "model")
    with pytest.raises(PyTritonClientValueError):
        AsyncioDecoupledModelClient("http://localhost:8000", "model")


def test_unreachable_server_times_out():
    started = time.monotonic()
    with pytest.raises(PyTritonClientTimeoutError):
        ModelClient("grpc://127.0.0.1:1", "model", init_timeout_s=0.5, lazy_init=False)
    assert time.monotonic() - started < 5


# ---- ModelClient ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", URL_FORMS)
def test_model_client_batching_model(servers, form):
    a, b = f32(1, 2, 3), f32(10, 20, 30)
    with ModelClient(url_of(servers["add_sub"], form), "add_sub", init_timeout_s=30) as client:
        config = client.model_config
        assert isinstance(config, TritonModelConfig)
        assert config.model_name == "add_sub" and config.max_batch_size == 8
        assert [spec.name for spec in config.inputs] == ["INPUT0", "INPUT1"]
        assert [spec.name for spec in config.outputs] == ["OUTPUT0", "OUTPUT1"]
        assert config.inputs[0].datatype == "FP32" and config.inputs[0].shape == (-1,)
        assert client.is_batching_supported
        # positional inputs follow the configuration's order: OUTPUT1 = INPUT0 - INPUT1
        result = client.infer_sample(a, b)
        assert set(result) == {"OUTPUT0", "OUTPUT1"}
        np.testing.assert_array_equal(result["OUTPUT0"], a + b)
        np.testing.assert_array_equal(result["OUTPUT1"], a - b)
        assert result["OUTPUT0"].shape == (3,) and result["OUTPUT0"].dtype == np.float32
        result = client.infer_sample(INPUT1=a, INPUT0=b)
        np.testing.assert_array_equal(result["OUTPUT1"], b - a)
        batch = client.infer_batch(INPUT0=np.stack([a, b]), INPUT1=np.stack([b, a]))
        assert batch["OUTPUT0"].shape == (2, 3)
        np.testing.assert_array_equal(batch["OUTPUT1"], np.stack([a - b, b - a]))
        positional = client.infer_batch(np.stack([a, b]), np.stack([b, a]))
        np.testing.assert_array_equal(positional["OUTPUT1"], batch["OUTPUT1"])


@pytest.mark.parametrize("form", URL_FORMS)
def test_model_client_non_batching_model_with_bytes(servers, form):
    floats = np.arange(6, dtype=np.float32)
    texts = np.array([b"alpha", b"", b"\x00\xffbinary"], dtype=object)
    with ModelClient(url_of(servers["identity"], form), "identity", init_timeout_s=30) as client:
        assert not client.is_batching_supported
        assert client.model_config.max_batch_size == 0
        result = client.infer_sample(IN_F=floats, IN_S=texts)
        np.testing.assert_array_equal(result["OUT_F"], floats)
        assert result["OUT_S"].tolist() == texts.tolist()
        result = client.infer_sample(floats, np.array([b"x", b"yz"]))  # fixed-width bytes (dtype S) work too
        assert result["OUT_S"].tolist() == [b"x", b"yz"]
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
            client.infer_batch(IN_F=floats, IN_S=texts)


@pytest.mark.parametrize("form", PROTOCOLS)
def test_model_client_batching_model_with_bytes(servers, form):
    texts = np.array([b"one", b"two"], dtype=object)
    floats = f32(1.5, -2.5)
    with ModelClient(url_of(servers["identity_batching"], form), "identity_batching") as client:
        result = client.infer_sample(IN_F=floats, IN_S=texts)
        assert result["OUT_S"].shape == (2,) and result["OUT_S"].tolist() == [b"one", b"two"]
        batch = client.infer_batch(IN_F=np.stack([floats] * 3), IN_S=np.stack([texts] * 3))
        assert batch["OUT_S"].shape == (3, 2) and batch["OUT_F"].shape == (3, 2)
        assert batch["OUT_S"][2].tolist() == [b"one", b"two"]


@pytest.mark.parametrize("form", PROTOCOLS)
def test_input_validation(servers, form):
    with ModelClient(url_of(servers["add_sub"], form), "add_sub") as client:
        with pytest.raises(PyTritonClientValueError, match="either positional"):
            client.infer_sample(f32(1), INPUT1=f32(2))
        with pytest.raises(PyTritonClientValueError, match=r"Provide input data: model add_sub has inputs"):
            client.infer_sample()
        with pytest.raises(PyTritonClientValueError, match=r"Provide input data: model add_sub has inputs"):
            client.infer_batch()
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(f32(1), f32(2), f32(3))  # more positional inputs than the model has
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(f32(1), f32(2), parameters={"bad": [1, 2]})
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(f32(1), f32(2), headers={"bad": None})
    with ModelClient(url_of(servers["identity"], form), "identity") as client:
        with pytest.raises(PyTritonClientValueError, match="Unicode"):
            client.infer_sample(IN_F=f32(1), IN_S=np.array(["text"]))
        with pytest.raises(PyTritonClientValueError, match="dtype=object"):
            client.infer_sample(IN_F=f32(1), IN_S=np.array(["text"], dtype=object))


@pytest.mark.parametrize("form", PROTOCOLS)
def test_model_without_inputs_is_called_without_inputs(servers, form):
    with ModelClient(url_of(servers["no_inputs"], form), "no_inputs") as client:
        assert client.infer_sample()["ANSWER"].tolist() == [42]


@pytest.mark.parametrize("form", PROTOCOLS)
def test_parameters_and_headers(servers, form):
    inputs = {"INPUT": np.zeros(4, dtype=np.float32), "TEXT": np.array([b"a", b"b"], dtype=object)}
    with ModelClient(url_of(servers["echo"], form), "echo_parameters") as client:
        result = client.infer_sample(**inputs, parameters={"s": "text", "n": 3, "flag": True})
        assert result["PARAMS"].tolist() == [b"flag=True;n=3;s='text'"]
        result = client.infer_sample(**inputs, headers={"x-request-tag": "abc"})
        assert result["PARAMS"].tolist() == [b"x-request-tag='abc'"]
        result = client.infer_sample(**inputs)
        assert result["PARAMS"].tolist() == [b""]


@pytest.mark.parametrize("form", PROTOCOLS)
def test_server_error_message(servers, form):
    with ModelClient(url_of(servers["raises"], form), "raises") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="the callable failed on purpose"):
            client.infer_sample(np.zeros(4, dtype=np.float32))
        # still usable afterwards
        with pytest.raises(PyTritonClientInferenceServerError, match="the callable failed on purpose"):
            client.infer_sample(X=np.zeros(4, dtype=np.float32))


@pytest.mark.parametrize("form", PROTOCOLS)
def test_unknown_model(servers, form):
    url = url_of(servers["add_sub"], form)
    started = time.monotonic()
    with pytest.raises(PyTritonClientModelUnavailableError):
        ModelClient(url, "no_such_model", init_timeout_s=1, lazy_init=False)
    assert time.monotonic() - started < 10
    with ModelClient(url, "no_such_model", init_timeout_s=0.5) as client:
        with pytest.raises(PyTritonClientModelUnavailableError):
            client.infer_sample(f32(1))
        with pytest.raises(PyTritonClientModelUnavailableError):
            client.wait_for_model(0.5)
    with (
        ModelClient(url, "add_sub", model_version="7", init_timeout_s=0.5) as client,
        pytest.raises(PyTritonClientModelUnavailableError),
    ):
        client.model_config  # noqa: B018


@pytest.mark.parametrize("form", PROTOCOLS)
def test_inference_timeout(servers, form):
    url = url_of(servers["slow"], form)
    x = np.array([1], dtype=np.int32)
    with ModelClient(url, "slow_pid", inference_timeout_s=1) as client:
        client.wait_for_model(30)
        started = time.monotonic()
        with pytest.raises(PyTritonClientTimeoutError):
            client.infer_sample(x, parameters={"sleep": "3"})
        assert 0.9 < time.monotonic() - started < 2.5
    with ModelClient(url, "slow_pid", inference_timeout_s=20) as client:
        result = client.infer_sample(x, parameters={"sleep": "0"})
        assert result["PID"].dtype == np.int64 and result["PID"].shape == (1,)


@pytest.mark.parametrize("form", URL_FORMS)
def test_wait_for_model_and_lazy_init(servers, form):
    url = url_of(servers["add_sub"], form)
    with ModelClient(url, "add_sub", lazy_init=False, init_timeout_s=30) as client:
        assert client._model_config is not None  # read during __init__
        client.wait_for_server(10)
        client.wait_for_model(10)
        assert client.model_config.max_batch_size == 8


@pytest.mark.parametrize("form", PROTOCOLS)
def test_closed_client(servers, form):
    client = ModelClient(url_of(servers["add_sub"], form), "add_sub")
    client.close()
    client.close()  # twice is fine
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(f32(1), f32(2))
    with pytest.raises(PyTritonClientClosedError):
        client.wait_for_model(1)


@pytest.mark.parametrize("form", PROTOCOLS)
def test_from_existing_client(servers, form):
    with ModelClient(url_of(servers["add_sub"], form), "add_sub", inference_timeout_s=12, access_token="tok") as client:
        config = client.model_config
        with ModelClient.from_existing_client(client) as clone:
            assert clone._model_config is config  # no new round trip for the configuration
            assert clone._inference_timeout_s == 12 and clone._access_token == "tok"
            np.testing.assert_array_equal(clone.infer_sample(f32(1), f32(2))["OUTPUT0"], f32(3))


@pytest.mark.parametrize("form", PROTOCOLS)
def test_model_config_given(servers, form):
    url = url_of(servers["add_sub"], form)
    with ModelClient(url, "add_sub") as client:
        config = client.model_config
    with ModelClient(url, "add_sub", model_config=config, ensure_model_is_ready=False) as client:
        assert client.model_config is config
        np.testing.assert_array_equal(client.infer_sample(f32(2), f32(2))["OUTPUT0"], f32(4))


@pytest.mark.parametrize("form", PROTOCOLS)
def test_utils_functions(servers, form):
    server = servers["add_sub"]
    client = create_client_from_url(url_of(server, form), network_timeout_s=10)
    try:
        wait_for_server_ready(client, timeout_s=10)
        wait_for_model_ready(client, "add_sub", timeout_s=10)
        config = get_model_config(client, "add_sub", timeout_s=10)
        assert config.max_batch_size == 8 and [s.name for s in config.outputs] == ["OUTPUT0", "OUTPUT1"]
        assert get_model_state(client, "add_sub") == ModelState.READY
        assert get_model_state(client, "add_sub", "1") == ModelState.READY
        assert get_model_state(client, "nope") == ModelState.UNAVAILABLE
        with pytest.raises(PyTritonClientModelUnavailableError):
            wait_for_model_ready(client, "nope", timeout_s=0.3)
    finally:
        client.close()


# ---- access tokens ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", PROTOCOLS)
def test_access_token_model_client(servers, form):
    url = url_of(servers["restricted"], form)
    floats, texts = f32(1, 2), np.array([b"t"], dtype=object)
    with ModelClient(url, "identity", access_token=TOKEN) as client:
        result = client.infer_sample(IN_F=floats, IN_S=texts)
        np.testing.assert_array_equal(result["OUT_F"], floats)
    with ModelClient(url, "identity") as client:  # model-config is open, inference is not
        assert client.model_config.model_name == "identity"
        with pytest.raises(PyTritonClientInferenceServerError, match="restricted"):
            client.infer_sample(IN_F=floats, IN_S=texts)
    with (
        ModelClient(url, "identity", access_token="wrong") as client,
        pytest.raises(PyTritonClientInferenceServerError, match="restricted"),
    ):
        client.infer_sample(IN_F=floats, IN_S=texts)
    # a token passed as an explicit header works as well
    with ModelClient(url, "identity") as client:
        result = client.infer_sample(IN_F=floats, IN_S=texts, headers=create_auth_headers(TOKEN, form))
        np.testing.assert_array_equal(result["OUT_F"], floats)


@pytest.mark.parametrize("form", PROTOCOLS)
def test_access_token_other_clients(servers, form):
    url = url_of(servers["restricted"], form)
    inputs = {"IN_F": f32(3), "IN_S": np.array([b"s"], dtype=object)}
    with FuturesModelClient(url, "identity", access_token=TOKEN) as client:
        np.testing.assert_array_equal(client.infer_sample(**inputs).result(timeout=60)["OUT_F"], f32(3))
    with (
        FuturesModelClient(url, "identity") as client,
        pytest.raises(PyTritonClientInferenceServerError, match="restricted"),
    ):
        client.infer_sample(**inputs).result(timeout=60)

    async def run():
        async with AsyncioModelClient(url, "identity", access_token=TOKEN) as client:
            np.testing.assert_array_equal((await client.infer_sample(**inputs))["OUT_F"], f32(3))
        async with AsyncioModelClient(url, "identity") as client:
            with pytest.raises(PyTritonClientInferenceServerError, match="restricted"):
                await client.infer_sample(**inputs)

    asyncio.run(run())


@pytest.mark.parametrize("form", PROTOCOLS)
def test_access_token_reaches_every_call(servers, form):
    """health, metadata, model-config and inference all restricted: the token goes with every call."""
    url = url_of(servers["restricted_all"], form)
    floats = np.stack([f32(1, 2)] * 2)
    texts = np.stack([np.array([b"a", b"b"], dtype=object)] * 2)
    with ModelClient(url, "identity_all", access_token=TOKEN, lazy_init=False, init_timeout_s=30) as client:
        client.wait_for_server(10)
        assert client.model_config.max_batch_size == 4
        np.testing.assert_array_equal(client.infer_batch(IN_F=floats, IN_S=texts)["OUT_F"], floats)
    started = time.monotonic()
    with pytest.raises(PyTritonClientInferenceServerError, match="restricted"):
        ModelClient(url, "identity_all", lazy_init=False, init_timeout_s=30)
    assert time.monotonic() - started < 10  # refused at once, not after the init timeout
    with FuturesModelClient(url, "identity_all", access_token=TOKEN) as client:
        assert client.model_config().result(timeout=60).max_batch_size == 4
        np.testing.assert_array_equal(client.infer_batch(IN_F=floats, IN_S=texts).result(timeout=60)["OUT_F"], floats)

    async def run():
        async with AsyncioModelClient(url, "identity_all", access_token=TOKEN, lazy_init=False) as client:
            assert (await client.model_config).max_batch_size == 4
            result = await client.infer_batch(IN_F=floats, IN_S=texts)
            assert result["OUT_S"].tolist() == texts.tolist()
        with pytest.raises(PyTritonClientInferenceServerError, match="restricted"):
            async with AsyncioModelClient(url, "identity_all", lazy_init=False):
                pass

    asyncio.run(run())


# ---- FuturesModelClient -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", URL_FORMS)
def test_futures_client(servers, form):
    url = url_of(servers["add_sub"], form)
    with FuturesModelClient(url, "add_sub", max_workers=4) as client:
        assert client.wait_for_model(30).result(timeout=60) is None
        config = client.model_config().result(timeout=60)
        assert isinstance(config, TritonModelConfig) and config.max_batch_size == 8
        futures = [client.infer_sample(f32(i), f32(1)) for i in range(20)]
        for i, future in enumerate(futures):
            np.testing.assert_array_equal(future.result(timeout=60)["OUTPUT0"], f32(i + 1))
        batch = client.infer_batch(INPUT0=np.ones((3, 2), np.float32), INPUT1=np.ones((3, 2), np.float32))
        assert batch.result(timeout=60)["OUTPUT0"].shape == (3, 2)
        mixed = client.infer_sample(f32(1), INPUT1=f32(2))
        with pytest.raises(PyTritonClientValueError):
            mixed.result(timeout=60)
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(f32(1), f32(1))
    client.close()  # closing twice is fine


def test_futures_client_runs_requests_concurrently(servers):
    server = servers["slow_pool"]
    x = np.array([1], dtype=np.int32)
    for url in (f"grpc://{server.grpc_url}", f"http://{server.http_url}"):
        with FuturesModelClient(url, "slow_pool", max_workers=2, inference_timeout_s=30) as client:
            client.wait_for_model(30).result(timeout=60)
            started = time.monotonic()
            futures = [client.infer_sample(x, parameters={"sleep": "1"}) for _ in range(2)]
            pids = {int(f.result(timeout=60)["PID"][0]) for f in futures}
            elapsed = time.monotonic() - started
        assert elapsed < 1.9, f"two 1 s requests on two workers took {elapsed:.2f} s"
        assert len(pids) == 2


def test_futures_client_non_blocking_queue_full(servers):
    server = servers["slow_pool"]
    x = np.array([1], dtype=np.int32)
    with FuturesModelClient(
        f"grpc://{server.grpc_url}", "slow_pool", max_workers=1, max_queue_size=1, non_blocking=True,
        inference_timeout_s=30,
    ) as client:
        accepted = []
        with pytest.raises(PyTritonClientQueueFullError):
            for _ in range(5):
                accepted.append(client.infer_sample(x, parameters={"sleep": "0.5"}))
        assert 1 <= len(accepted) <= 2
        for future in accepted:
            assert future.result(timeout=60)["PID"].shape == (1,)


def test_futures_client_blocking_queue(servers):
    server = servers["add_sub"]
    with FuturesModelClient(f"grpc://{server.grpc_url}", "add_sub", max_workers=2, max_queue_size=1) as client:
        futures = [client.infer_sample(f32(i), f32(i)) for i in range(10)]  # blocks instead of failing
        assert [float(f.result(timeout=60)["OUTPUT0"][0]) for f in futures] == [2.0 * i for i in range(10)]


def test_futures_client_errors(servers):
    with (
        FuturesModelClient(f"grpc://{servers['raises'].grpc_url}", "raises") as client,
        pytest.raises(PyTritonClientInferenceServerError, match="failed on purpose"),
    ):
        client.infer_sample(np.zeros(4, np.float32)).result(timeout=60)
    with (
        FuturesModelClient(f"http://{servers['add_sub'].http_url}", "nope", init_timeout_s=0.5) as client,
        pytest.raises(PyTritonClientModelUnavailableError),
    ):
        client.infer_sample(f32(1)).result(timeout=60)


def test_model_client_in_threads(servers):
    """Separate ModelClients in separate threads (gevent-based HTTP included)."""
    errors = []

    def work(url):
        try:
            with ModelClient(url, "add_sub") as client:
                for i in range(5):
                    np.testing.assert_array_equal(client.infer_sample(f32(i), f32(i))["OUTPUT0"], f32(2 * i))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    server = servers["add_sub"]
    threads = [threading.Thread(target=work, args=(url,)) for url in
               [f"grpc://{server.grpc_url}", f"http://{server.http_url}"] * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors


# ---- AsyncioModelClient -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", URL_FORMS)
def test_asyncio_client(servers, form):
    url = url_of(servers["add_sub"], form)
    a, b = f32(1, 2), f32(5, 7)

    async def run():
        async with AsyncioModelClient(url, "add_sub", init_timeout_s=30) as client:
            await client.wait_for_model(30)
            config = await client.model_config
            assert isinstance(config, TritonModelConfig) and config.max_batch_size == 8
            assert await client.is_batching_supported
            result = await client.infer_sample(a, b)
            np.testing.assert_array_equal(result["OUTPUT1"], a - b)
            batch = await client.infer_batch(INPUT0=np.stack([a, b]), INPUT1=np.stack([b, a]))
            assert batch["OUTPUT0"].shape == (2, 2)
            results = await asyncio.gather(*(client.infer_sample(f32(i), f32(i)) for i in range(10)))
            assert [float(r["OUTPUT0"][0]) for r in results] == [2.0 * i for i in range(10)]
            with pytest.raises(PyTritonClientValueError):
                await client.infer_sample(a, INPUT1=b)
        with pytest.raises(PyTritonClientClosedError):
            await client.infer_sample(a, b)

    asyncio.run(run())


@pytest.mark.parametrize("form", PROTOCOLS)
def test_asyncio_client_non_batching_bytes_and_parameters(servers, form):
    async def run():
        async with AsyncioModelClient(url_of(servers["identity"], form), "identity") as client:
            texts = np.array([b"q", b"rs"], dtype=object)
            result = await client.infer_sample(IN_F=f32(1), IN_S=texts)
            assert result["OUT_S"].tolist() == [b"q", b"rs"]
            with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
                await client.infer_batch(IN_F=f32(1), IN_S=texts)
        async with AsyncioModelClient(url_of(servers["echo"], form), "echo_parameters") as client:
            result = await client.infer_sample(
                INPUT=np.zeros(4, np.float32), TEXT=np.array([b"a", b"b"], dtype=object),
                parameters={"k": "v"}, headers={"x-h": "1"},
            )
            assert result["PARAMS"].tolist() == [b"k='v';x-h='1'"]

    asyncio.run(run())


@pytest.mark.parametrize("form", PROTOCOLS)
def test_asyncio_client_errors(servers, form):
    async def run():
        async with AsyncioModelClient(url_of(servers["raises"], form), "raises") as client:
            with pytest.raises(PyTritonClientInferenceServerError, match="failed on purpose"):
                await client.infer_sample(np.zeros(4, np.float32))
        with pytest.raises(PyTritonClientModelUnavailableError):
            async with AsyncioModelClient(url_of(servers["raises"], form), "nope", init_timeout_s=0.5, lazy_init=False):
                pass
        async with AsyncioModelClient(url_of(servers["slow"], form), "slow_pid", inference_timeout_s=1) as client:
            await client.wait_for_model(30)
            started = time.monotonic()
            with pytest.raises(PyTritonClientTimeoutError):
                await client.infer_sample(np.array([1], np.int32), parameters={"sleep": "3"})
            assert time.monotonic() - started < 2.5

    asyncio.run(run())


# ---- decoupled ----------------------------------------------------------------------------------------------


@needs_decoupled
def test_decoupled_client(servers):
    url = f"grpc://{servers['countdown'].grpc_url}"
    with DecoupledModelClient(url, "countdown") as client:
        assert client.model_config.decoupled
        responses = client.infer_sample(np.array([3], np.int32))
        assert not isinstance(responses, dict)
        values = [r["VALUE"].tolist() for r in responses]
        assert values == [[2], [1], [0]]
        assert list(client.infer_sample(COUNT=np.array([0], np.int32))) == []
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
            client.infer_batch(np.array([[1]], np.int32))
        # one stream at a time
        first = client.infer_sample(np.array([4], np.int32))
        assert next(first)["VALUE"].tolist() == [3]
        with pytest.raises(PyTritonClientInferenceServerError, match="already in progress"):
            client.infer_sample(np.array([1], np.int32))
        first.close()  # abandon it early
        assert [r["VALUE"].tolist() for r in client.infer_sample(np.array([2], np.int32))] == [[1], [0]]


@needs_decoupled
def test_model_client_refuses_decoupled_model(servers):
    with (
        ModelClient(f"grpc://{servers['countdown'].grpc_url}", "countdown") as client,
        pytest.raises(PyTritonClientInferenceServerError, match="DecoupledModelClient"),
    ):
        client.infer_sample(np.array([1], np.int32))


@needs_decoupled
def test_decoupled_client_batching_model(servers):
    url = f"grpc://{servers['batched_countdown'].grpc_url}"
    with DecoupledModelClient(url, "batched_countdown") as client:
        assert client.is_batching_supported
        samples = list(client.infer_sample(np.array([2], np.int32)))
        assert [s["VALUE"].tolist() for s in samples] == [[1], [0]]
        batches = list(client.infer_batch(COUNT=np.array([[3], [2]], np.int32)))
        assert [b["VALUE"].tolist() for b in batches] == [[[2], [1]], [[1], [0]], [[0], [-1]]]


@needs_decoupled
def test_decoupled_client_errors_and_timeouts(servers):
    with DecoupledModelClient(f"grpc://{servers['fail_stream'].grpc_url}", "countdown_then_fail") as client:
        responses = client.infer_sample(np.array([1], np.int32))
        assert next(responses)["VALUE"].tolist() == [7]
        with pytest.raises(PyTritonClientInferenceServerError, match="failed on purpose"):
            next(responses)
        # the client is free again
        responses = client.infer_sample(np.array([1], np.int32))
        assert next(responses)["VALUE"].tolist() == [7]
        responses.close()
    with (
        DecoupledModelClient(f"grpc://{servers['countdown'].grpc_url}", "nope", init_timeout_s=0.5) as client,
        pytest.raises(PyTritonClientModelUnavailableError),
    ):
        client.infer_sample(np.array([1], np.int32))


@needs_decoupled
def test_decoupled_parameters_headers_and_token(servers):
    url = f"grpc://{servers['stream_params'].grpc_url}"
    with DecoupledModelClient(url, "stream_parameters", access_token=TOKEN) as client:
        responses = list(client.infer_sample(np.array([1], np.int32), parameters={"p": "1"}, headers={"x-q": "2"}))
        assert [r["PARAMS"].tolist() for r in responses] == [[b"p=1;x-q=2"]] * 2

    async def run():
        async with AsyncioDecoupledModelClient(url, "stream_parameters") as client:
            responses = [r async for r in client.infer_sample(np.array([1], np.int32), parameters={"p": "3"},
                                                               headers={"x-q": "4"})]
            assert [r["PARAMS"].tolist() for r in responses] == [[b"p=3;x-q=4"]] * 2

    asyncio.run(run())


@needs_decoupled
def test_asyncio_decoupled_client(servers):
    async def run():
        url = f"grpc://{servers['countdown'].grpc_url}"
        async with AsyncioDecoupledModelClient(url, "countdown") as client:
            assert (await client.model_config).decoupled
            values = [r["VALUE"].tolist() async for r in client.infer_sample(np.array([3], np.int32))]
            assert values == [[2], [1], [0]]
            assert [r async for r in client.infer_sample(COUNT=np.array([0], np.int32))] == []

            async def consume(n):
                return [int(r["VALUE"][0]) async for r in client.infer_sample(np.array([n], np.int32))]

            # several streams at once on one asyncio client
            assert await asyncio.gather(consume(2), consume(3)) == [[1, 0], [2, 1, 0]]
            with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
                async for _ in client.infer_batch(np.array([[1]], np.int32)):
                    pass
        url = f"grpc://{servers['batched_countdown'].grpc_url}"
        async with AsyncioDecoupledModelClient(url, "batched_countdown") as client:
            samples = [r["VALUE"].tolist() async for r in client.infer_sample(np.array([2], np.int32))]
            assert samples == [[1], [0]]
            batches = [r["VALUE"].tolist() async for r in client.infer_batch(np.array([[2], [1]], np.int32))]
            assert batches == [[[1], [0]], [[0], [-1]]]
        url = f"grpc://{servers['fail_stream'].grpc_url}"
        async with AsyncioDecoupledModelClient(url, "countdown_then_fail") as client:
            got = []
            with pytest.raises(PyTritonClientInferenceServerError, match="failed on purpose"):
                async for response in client.infer_sample(np.array([1], np.int32)):
                    got.append(response["VALUE"].tolist())
            assert got == [[7]]

    asyncio.run(run())


@needs_decoupled
def test_decoupled_clients_with_access_token(servers):
    # the restricted server is not decoupled: a non-decoupled model streams one response per request
    url = f"grpc://{servers['restricted'].grpc_url}"
    inputs = {"IN_F": f32(4), "IN_S": np.array([b"z"], dtype=object)}
    with DecoupledModelClient(url, "identity", access_token=TOKEN) as client:
        [response] = list(client.infer_sample(**inputs))
        np.testing.assert_array_equal(response["OUT_F"], f32(4))
    with (
        DecoupledModelClient(url, "identity") as client,
        pytest.raises(PyTritonClientInferenceServerError, match="restricted"),
    ):
        list(client.infer_sample(**inputs))

    async def run():
        async with AsyncioDecoupledModelClient(url, "identity", access_token=TOKEN) as client:
            [response] = [r async for r in client.infer_sample(**inputs)]
            assert response["OUT_S"].tolist() == [b"z"]
        async with AsyncioDecoupledModelClient(url, "identity") as client:
            # The server ends the stream at once, before the client's request (as Triton does). grpc.aio then
            # sometimes reports its own INTERNAL "Internal error from Core" for the request it could not send
            # instead of the server's status: grpc/grpc#36066 (a client-library race, fix pending upstream).
            with pytest.raises(PyTritonClientInferenceServerError, match="restricted|Internal error from Core"):
                async for _ in client.infer_sample(**inputs):
                    pass

    asyncio.run(run())
