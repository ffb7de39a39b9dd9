"""A model repository (Triton Python-backend model, worker processes in each replica) on two replicas: served over
HTTP and gRPC; deleting the application stops each replica's server, its workers and its shared memory."""

from __future__ import annotations

import os
import shutil

import numpy
import pytest

pytest.importorskip("ray")

from tests._support.paths import REPO
from tests._support.rss import descendants
from tests._support.ray_cluster import WAIT_S, running_replicas, serve, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

APP = "repository"


def _is_worker(pid: int) -> bool:
    """A model's worker process (forked from the worker template or not, its command line says so)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"pytriton.backends.worker" in cmdline.read()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _segments_of(pids: set[int]) -> list[str]:
    """/dev/shm segments of ours (pytriton_<tag>_<pid>_...) owned by one of `pids`."""
    out = []
    for name in os.listdir("/dev/shm"):
        parts = name.split("_")
        if name.startswith("pytriton_") and len(parts) > 2 and parts[2].isdigit() and int(parts[2]) in pids:
            out.append(name)
    return out


def test_repository_on_two_replicas(ray_cluster, tmp_path):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    import pytriton.ray

    repository = tmp_path / "models"
    shutil.copytree(REPO / "tests" / "repositories" / "models" / "add_sub", repository / "add_sub")
    application = pytriton.ray.from_repository(
        str(repository), num_replicas=2, ray_actor_options={"num_cpus": 0.1, "resources": {"triton": 1}})
    serve.run(application, name=APP, route_prefix="/", blocking=False)
    deleted = False
    try:
        wait_for(lambda: running_replicas(APP) == 2 and serve.status().applications[APP].status == "RUNNING",
                 what="2 running replicas")
        handle = serve.get_deployment_handle("TritonReplica", app_name=APP)
        infos = {}
        for _ in range(20):
            info = handle.replica_info.remote().result(timeout_s=WAIT_S)
            infos[info["pid"]] = info
        assert len(infos) == 2 and len({i["node_id"] for i in infos.values()}) == 2
        assert all(i["models"] == ["add_sub"] for i in infos.values())
        replica_pids = set(infos)
        worker_pids = {p for pid in replica_pids for p in descendants(pid) if _is_worker(p)}
        assert len(worker_pids) >= 2, "each replica runs the model in a worker process"

        a = numpy.arange(4, dtype=numpy.float32).reshape(1, 4)
        b = numpy.ones((1, 4), dtype=numpy.float32)
        http = httpclient.InferenceServerClient(ray_cluster["http"], network_timeout=WAIT_S)
        grpc = grpcclient.InferenceServerClient(ray_cluster["grpc"])
        try:
            for _ in range(10):
                inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
                inputs[0].set_data_from_numpy(a)
                inputs[1].set_data_from_numpy(b)
                result = http.infer("add_sub", inputs)
                numpy.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
                ginputs = [grpcclient.InferInput("INPUT0", [1, 4], "FP32"), grpcclient.InferInput("INPUT1", [1, 4], "FP32")]
                ginputs[0].set_data_from_numpy(a)
                ginputs[1].set_data_from_numpy(b)
                gresult = grpc.infer("add_sub", ginputs, client_timeout=WAIT_S)
                numpy.testing.assert_array_equal(gresult.as_numpy("OUTPUT1"), a - b)
            assert http.get_model_config("add_sub")["max_batch_size"] == 8
        finally:
            http.close()
            grpc.close()

        serve.delete(APP)
        deleted = True
        everything = replica_pids | worker_pids
        wait_for(lambda: not any(_alive(pid) for pid in everything), what="replicas and their workers gone")
        assert not _segments_of(everything)
    finally:
        if not deleted:
            serve.delete(APP)
