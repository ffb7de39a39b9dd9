"""The user's process behind `Triton.bind` runs the callables; the server runs in a process of its own. Importing
the PyTriton API must not load the server's front-ends, core or grpcio into the user's process: they cost it
~14 MiB of resident memory (measured with scripts/bench_lib/serve_double.py: 59 MiB against 45 MiB)."""

from __future__ import annotations

import json
import subprocess
import sys

SERVER_SIDE = ("grpc", "tritonclient", "hpack", "httptools", "pytriton.core", "pytriton.frontend.grpc.server",
               "pytriton.frontend.http1.listener", "pytriton.supervisor.worker_pool")


def test_the_pytriton_api_does_not_import_the_server():
    code = (
        "import json, sys\n"
        "from pytriton.triton import Triton, TritonConfig\n"
        "from pytriton.decorators import batch\n"
        "from pytriton.model_config import ModelConfig, Tensor\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout))
    assert sorted(name for name in loaded if name.split(".")[0] in SERVER_SIDE or name in SERVER_SIDE
                  or any(name.startswith(prefix + ".") for prefix in SERVER_SIDE)) == []


def test_the_lazy_packages_still_give_their_names():
    from pytriton.frontend.grpc import GrpcFrontend, H2Limits
    from pytriton.frontend.http1 import HttpLimits, HttpListener, error_response
    from pytriton.supervisor import WorkerPool, WorkerStartError

    assert {GrpcFrontend.__module__, H2Limits.__module__, HttpLimits.__module__, HttpListener.__module__,
            error_response.__module__, WorkerPool.__module__, WorkerStartError.__module__} == {
        "pytriton.frontend.grpc.server", "pytriton.config.h2", "pytriton.config.http1",
        "pytriton.frontend.http1.listener", "pytriton.frontend.http1.messages", "pytriton.supervisor.worker_pool"}


def test_a_lazy_package_has_no_other_names():
    import pytriton.supervisor

    assert not hasattr(pytriton.supervisor, "Nothing")
