"""tritonfrontend: Triton's KServeHttp, KServeGrpc and Metrics over an in-process server. One process serves
in-process requests (`Model.infer` in the main thread) and tritonclient's (gRPC and HTTP, in threads) at the same
time, with the same models; statistics and metrics count both; stopped front-ends release their ports; options
and errors as Triton's (qa/L0_python_api/test_kserve.py)."""

from __future__ import annotations

import gc
import os
import socket
import threading
import time
import urllib.request

import numpy
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import pytriton.tritonserver as tritonserver
from pytriton.tritonfrontend import KServeGrpc, KServeHttp, Metrics
from tests._support.paths import REPOSITORIES
from tests._support.waits import wait_for_file

MODELS = str(REPOSITORIES / "models")
LOCAL = "127.0.0.1"


def _our_segments() -> list[str]:
    return [e for e in os.listdir("/dev/shm") if e.startswith("pytriton_") and f"_{os.getpid()}_" in e]


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((LOCAL, port)) != 0


@pytest.fixture(scope="module")
def server():
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5).start(wait_until_ready=True, timeout=60)
    yield server
    server.stop()
    gc.collect()
    assert _our_segments() == []


def _inputs(a: float, b: float) -> dict[str, numpy.ndarray]:
    return {"INPUT0": numpy.full((1, 4), a, numpy.float32), "INPUT1": numpy.full((1, 4), b, numpy.float32)}


def _success_count(server: tritonserver.Server) -> int:
    return server.model("add_sub").statistics()["model_stats"][0]["inference_stats"]["success"]["count"]


# ---- options, as Triton's tests check them ----------------------------------------------------------------
def test_options_take_triton_fields_and_defaults():
    assert KServeHttp.Options() == KServeHttp.Options(address="0.0.0.0", port=8000, reuse_port=False,
                                                      thread_count=8, header_forward_pattern="")
    KServeHttp.Options(address="0.0.0.1", port=8080, reuse_port=True, thread_count=16)
    grpc = KServeGrpc.Options(infer_compression_level=KServeGrpc.Grpc_compression_level.HIGH, reuse_port=True,
                              infer_allocation_pool_size=12, http2_max_pings_without_data=10)
    assert grpc.infer_compression_level == 3 and grpc.port == 8001 and grpc.keepalive_time_ms == 7_200_000
    assert Metrics.Options() == Metrics.Options(address="0.0.0.0", port=8002, thread_count=1)
    assert KServeHttp.Options(port="8080").port == 8080  # pydantic's lax mode: a numeric string is an int


@pytest.mark.parametrize("make, fields", [
    (KServeHttp.Options, {"port": -15}), (KServeHttp.Options, {"port": 65536}),
    (KServeHttp.Options, {"thread_count": 0}), (KServeHttp.Options, {"header_forward_pattern": 10}),
    (KServeGrpc.Options, {"port": -5}), (KServeGrpc.Options, {"keepalive_timeout_ms": -20_000}),
    (KServeGrpc.Options, {"keepalive_time_ms": -1}), (KServeGrpc.Options, {"http2_max_pings_without_data": -1}),
    (KServeGrpc.Options, {"http2_min_recv_ping_interval_without_data_ms": -1}),
    (KServeGrpc.Options, {"http2_max_ping_strikes": -1}), (KServeGrpc.Options, {"max_connection_age_ms": -1}),
    (KServeGrpc.Options, {"max_connection_age_grace_ms": -1}),
    (KServeGrpc.Options, {"infer_allocation_pool_size": "big pool"}), (KServeGrpc.Options, {"server_key": 10}),
    (Metrics.Options, {"port": -15}), (Metrics.Options, {"thread_count": 0}),
    (Metrics.Options, {"thread_count": "ten"}),
])
def test_bad_options_raise_a_value_error_naming_the_field(make, fields):
    (name,) = fields
    with pytest.raises(ValueError, match=f"validation error for .*Options\n{name}\n"):
        make(**fields)


@pytest.mark.parametrize("frontend", [KServeHttp, KServeGrpc, Metrics])
def test_options_of_another_type_refused(server, frontend):
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match=f"Incorrect type for options. options argument must be of type {frontend.__name__}"):
        frontend(server, {"port": 8001})


def test_unstarted_server_and_ssl_without_certificate_refused(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        KServeHttp(tritonserver.Server(model_repository=MODELS))
    with pytest.raises(tritonserver.InvalidArgumentError, match="use_ssl needs server_cert and server_key"):
        KServeGrpc(server, KServeGrpc.Options(use_ssl=True))
    with pytest.raises(tritonserver.InvalidArgumentError, match="mutual TLS needs root_cert"):
        KServeGrpc(server, KServeGrpc.Options(use_mutual_auth=True, server_cert="c.pem", server_key="k.pem"))


def test_grpc_mutual_tls(server, tmp_path):
    from tests.tls.certs import make_certs

    certs = make_certs(tmp_path)
    bad = KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0, use_ssl=True, server_cert=certs.server_pem,
                                                server_key=certs.ca_key))
    with pytest.raises(tritonserver.InvalidArgumentError, match=f"the server key '{certs.ca_key}' does not match"):
        bad.start()
    options = KServeGrpc.Options(address=LOCAL, port=0, use_ssl=True, use_mutual_auth=True,
                                 server_cert=certs.server_pem, server_key=certs.server_key, root_cert=certs.ca_pem)
    with KServeGrpc(server, options) as grpc:
        url = f"{LOCAL}:{grpc.port}"
        with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=certs.ca_pem) as client:
            with pytest.raises(grpcclient.InferenceServerException, match="UNAVAILABLE"):
                client.is_server_live()  # no client certificate
        with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=certs.ca_pem,
                                              private_key=certs.client_key,
                                              certificate_chain=certs.client_pem) as client:
            inputs = [grpcclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
            for tensor in inputs:
                tensor.set_data_from_numpy(numpy.full((1, 4), 2.0, numpy.float32))
            assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[4.0] * 4]


def test_inert_option_warned(server):
    with pytest.warns(UserWarning, match="KServeHttp.Options.thread_count is accepted but has no effect"):
        KServeHttp(server, KServeHttp.Options(address=LOCAL, port=0, thread_count=3))


# ---- one process, both kinds of client --------------------------------------------------------------------
def _grpc_client(port: int, count: int, errors: list, results: list) -> None:
    try:
        with grpcclient.InferenceServerClient(f"{LOCAL}:{port}") as client:
            for i in range(count):
                inputs = [grpcclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
                for tensor, value in zip(inputs, (i, 1.0)):
                    tensor.set_data_from_numpy(numpy.full((1, 4), value, numpy.float32))
                results.append((i + 1.0, client.infer("add_sub", inputs).as_numpy("OUTPUT0")[0, 0]))
    except Exception as exc:  # reported by the test
        errors.append(exc)


def _http_client(port: int, count: int, errors: list, results: list) -> None:
    try:
        client = httpclient.InferenceServerClient(f"{LOCAL}:{port}")
        try:
            for i in range(count):
                inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
                for tensor, value in zip(inputs, (i, 2.0)):
                    tensor.set_data_from_numpy(numpy.full((1, 4), value, numpy.float32))
                results.append((i - 2.0, client.infer("add_sub", inputs).as_numpy("OUTPUT1")[0, 0]))
        finally:
            client.close()
    except Exception as exc:
        errors.append(exc)


def test_in_process_and_network_clients_at_once(server):
    count = 20
    before = _success_count(server)
    grpc = KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0))
    http = KServeHttp(server, KServeHttp.Options(address=LOCAL, port=0))
    metrics = Metrics(server, Metrics.Options(address=LOCAL, port=0))
    with grpc, http, metrics:
        ports = [grpc.port, http.port, metrics.port]
        assert all(ports) and grpc.port != http.port
        with grpcclient.InferenceServerClient(f"{LOCAL}:{grpc.port}") as client:
            assert client.is_server_ready() and client.is_model_ready("add_sub")
        errors: list = []
        results: list = []
        threads = [threading.Thread(target=_grpc_client, args=(grpc.port, count, errors, results)),
                   threading.Thread(target=_http_client, args=(http.port, count, errors, results))]
        for thread in threads:
            thread.start()
        in_process = []
        for i in range(count):  # meanwhile, in this thread
            (response,) = server.model("add_sub").infer(inputs=_inputs(i, 3.0))
            in_process.append(numpy.from_dlpack(response.outputs["OUTPUT0"])[0, 0])
        for thread in threads:
            thread.join(60)
        assert errors == [] and not any(thread.is_alive() for thread in threads)
        assert in_process == [i + 3.0 for i in range(count)]
        assert len(results) == 2 * count and all(expected == got for expected, got in results)
        assert _success_count(server) == before + 3 * count  # statistics count both kinds of request
        with urllib.request.urlopen(f"http://{LOCAL}:{metrics.port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        line = next(x for x in text.splitlines() if x.startswith('nv_inference_request_success{model="add_sub"'))
        assert float(line.split()[-1]) == before + 3 * count
    assert grpc.port is None and all(_refused(port) for port in ports)  # the ports are released
    assert len(list(server.model("add_sub").infer(inputs=_inputs(1, 1)))) == 1  # the server goes on


@pytest.mark.parametrize("frontend, protocol", [(KServeHttp, "HTTP"), (KServeGrpc, "GRPC"), (Metrics, "HTTP")])
def test_start_twice_stop_twice_and_restart(server, frontend, protocol):
    service = frontend(server, frontend.Options(address=LOCAL, port=0))
    service.start()
    with pytest.raises(tritonserver.AlreadyExistsError, match=f"{protocol} server is already running."):
        service.start()
    port = service.port
    service.stop()
    assert _refused(port)
    with pytest.raises(tritonserver.UnavailableError, match=f"{protocol} server is not running."):
        service.stop()
    service.start()  # a stopped front-end starts again
    assert not _refused(service.port)
    service.stop()


def test_kserve_server_spelling_of_tritonfrontend_2_51(server):
    """Triton 2.51's tritonfrontend made a front-end as `KServeHttp.Server(server, options)` (2.52 dropped the
    `Server` level); Triton 2.52's OpenAI frontend (python/openai/openai_frontend/main.py) still calls it so."""
    with KServeHttp.Server(server, KServeHttp.Options(address=LOCAL, port=0)) as http, \
            KServeGrpc.Server(server, KServeGrpc.Options(address=LOCAL, port=0)) as grpc:
        with httpclient.InferenceServerClient(f"{LOCAL}:{http.port}") as client:
            assert client.is_server_ready()
        with grpcclient.InferenceServerClient(f"{LOCAL}:{grpc.port}") as client:
            assert client.is_model_ready("add_sub")
    assert isinstance(http, KServeHttp) and isinstance(grpc, KServeGrpc)
    assert http.port is None and grpc.port is None  # stopped on leaving the block


def test_port_in_use(server):
    with socket.socket() as taken:
        taken.bind((LOCAL, 0))
        taken.listen()
        port = taken.getsockname()[1]
        for frontend in (KServeHttp, KServeGrpc, Metrics):
            with pytest.raises(tritonserver.UnavailableError, match=f"Socket '{LOCAL}:{port}' already in use"):
                frontend(server, frontend.Options(address=LOCAL, port=port)).start()


def test_server_stop_closes_its_front_ends():
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5).start(wait_until_ready=True, timeout=60)
    http = KServeHttp(server, KServeHttp.Options(address=LOCAL, port=0))
    grpc = KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0))
    http.start()
    grpc.start()
    ports = [http.port, grpc.port]
    client = httpclient.InferenceServerClient(f"{LOCAL}:{http.port}")
    assert client.is_server_live()
    client.close()
    server.stop()  # before its front-ends, as Triton's test_server_service_order
    assert all(_refused(port) for port in ports)
    http.stop()  # stopped with its server: no error
    grpc.stop()
    gc.collect()
    assert _our_segments() == []


def test_client_system_shared_memory_over_grpc(server):
    import tritonclient.utils.shared_memory as shm

    data = numpy.full((1, 4), 5.0, numpy.float32)
    region = shm.create_shared_memory_region("tf_input", "/tf_input_test", data.nbytes * 2)
    try:
        shm.set_shared_memory_region(region, [data, data])
        with KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0)) as grpc, \
                grpcclient.InferenceServerClient(f"{LOCAL}:{grpc.port}") as client:
            client.register_system_shared_memory("tf_input", "/tf_input_test", data.nbytes * 2)
            inputs = [grpcclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
            inputs[0].set_shared_memory("tf_input", data.nbytes)
            inputs[1].set_shared_memory("tf_input", data.nbytes, offset=data.nbytes)
            assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[10.0] * 4]
            client.unregister_system_shared_memory("tf_input")
    finally:
        shm.destroy_shared_memory_region(region)
    assert "tf_input_test" not in os.listdir("/dev/shm")


def test_stop_cuts_the_calls_in_progress_and_the_server_goes_on(tmp_path):
    server = tritonserver.Server(model_repository=str(REPOSITORIES / "reqfields"), exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                 startup_models=["watch_cancel"]).start(wait_until_ready=True, timeout=60)
    try:
        results: list = []
        marker = tmp_path / "marker"
        grpc = KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0))
        grpc.start()
        client = grpcclient.InferenceServerClient(f"{LOCAL}:{grpc.port}")
        tensor = grpcclient.InferInput("X", [2], "FP32")
        tensor.set_data_from_numpy(numpy.ones(2, numpy.float32))
        done = threading.Event()
        client.async_infer("watch_cancel", [tensor],
                           parameters={"seconds": 20, "marker": str(marker), "started": str(tmp_path / "started")},
                           callback=lambda result, error: (results.append((result, error)), done.set()))
        wait_for_file(tmp_path / "started")  # the request is in the model
        started = time.monotonic()
        grpc.stop()  # as Triton's: the call is cut, not drained
        assert done.wait(10) and time.monotonic() - started < 10
        (result, error), = results
        assert result is None and ("CANCELLED" in str(error) or "UNAVAILABLE" in str(error))
        client.close()
        wait_for_file(marker, 10)
        assert marker.read_text() == "cancelled"  # the model saw its request cancelled
        (response,) = server.model("watch_cancel").infer(inputs={"X": numpy.ones(2, numpy.float32)},
                                                         parameters={"seconds": 0})
        assert numpy.from_dlpack(response.outputs["Y"]).tolist() == [1.0, 1.0]  # the server goes on
    finally:
        server.stop()


def test_forgotten_server_and_front_end_cleaned_up_at_exit(tmp_path):
    import subprocess
    import sys
    import tempfile

    script = (
        "import os, tritonserver, tritonfrontend\n"
        f"server = tritonserver.Server(model_repository={MODELS!r}, exit_timeout=5).start(wait_until_ready=True)\n"
        "http = tritonfrontend.KServeHttp(server, tritonfrontend.KServeHttp.Options(address='127.0.0.1', port=0))\n"
        "http.start()\n"
        "print(os.getpid(), http.port, flush=True)\n"  # and exit without stopping either
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    pid, port = done.stdout.split()
    assert _refused(int(port))
    assert not [e for e in os.listdir("/dev/shm") if f"_{pid}_" in e]
    assert not [e for e in os.listdir(tempfile.gettempdir()) if e.startswith("pytriton-") and f"-{pid}-" in e]
