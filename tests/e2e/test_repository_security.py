"""The doors of the repository extension, through tritonclient gRPC and HTTP: a load's configuration cannot name a
file outside the model's folder, uploads (`file:` parameters) are off unless the server allows them, an upload is
bounded and leaves no folder when refused, a configuration override is bounded in size and depth, and model names
are checked as Triton checks them."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.processes import pid_alive
from tests._support.serving import ServerProcess, serve

INVALID = {"grpc": "StatusCode.INVALID_ARGUMENT", "http": "400"}
UNSUPPORTED = {"grpc": "StatusCode.UNIMPLEMENTED", "http": "501"}

MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * 2)]) for r in requests]
"""
MARKER_MODEL = MODEL + """
open({marker!r}, "w").close()
"""


def config(name: str, **fields: object) -> str:
    output: dict = {"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}
    if "label_filename" in fields:
        output["label_filename"] = fields.pop("label_filename")
    return json.dumps({"name": name, "backend": "python", "max_batch_size": 0,
                       "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}], "output": [output],
                       **fields})


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(a repository with model 'm', a folder outside it with a secret and a model file that marks its import)."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text(MODEL)
    (repo / "m" / "config.pbtxt").write_text(
        'backend: "python"\ninput [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]\n')
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\nsecond line\n")
    (outside / "evil.py").write_text(MARKER_MODEL.format(marker=str(outside / "imported")))
    return repo, outside


def status(info: pytest.ExceptionInfo) -> str:
    return str(info.value.status())


def double(client, protocol: str, name: str = "m") -> list[float]:
    x = CLIENTS[protocol].InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([1.0], np.float32))
    return client.infer(name, [x]).as_numpy("Y").tolist()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_config_override_cannot_name_a_file_outside_the_model_folder(layout, protocol):
    """Seen: default_model_filename '/abs/x.py' or '../../../x.py' imported and ran that file; label_filename
    '/etc/passwd' was read and served as classification labels."""
    repo, outside = layout
    evil, secret = outside / "evil.py", outside / "secret.txt"
    overrides = [
        ("default_model_filename", str(evil), {"default_model_filename": str(evil)}),
        ("default_model_filename", os.path.relpath(evil, repo / "m" / "1"),
         {"default_model_filename": os.path.relpath(evil, repo / "m" / "1")}),
        ("label_filename", str(secret), {"label_filename": str(secret)}),
        ("label_filename", os.path.relpath(secret, repo / "m"),
         {"label_filename": os.path.relpath(secret, repo / "m")}),
    ]
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, protocol)
        for field, name, fields in overrides:
            with pytest.raises(InferenceServerException) as info:
                client.load_model("m", config=config("m", **fields))
            message = info.value.message()
            assert status(info) == INVALID[protocol], message
            assert field in message and f"'{name}'" in message and "model 'm'" in message, message
            assert "outside model directory" in message, message
            assert not client.is_model_ready("m")
        assert not (outside / "imported").exists()  # neither auto-complete's child nor a worker imported it
        client.load_model("m")  # the model's own files still load
        assert double(client, protocol) == [2.0]
        client.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_uploads_are_refused_unless_the_server_allows_them(layout, protocol):
    """Seen: any client could load `file:1/model.py` and have it run. Off by default; --allow-model-upload opens it
    (to the clients the model-repository restriction admits)."""
    repo, outside = layout
    files = {"file:1/model.py": MARKER_MODEL.format(marker=str(outside / "imported")).encode()}
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, protocol)
        with pytest.raises(InferenceServerException) as info:
            client.load_model("up", config=config("up"), files=files)
        assert status(info) == UNSUPPORTED[protocol]
        assert "--allow-model-upload" in info.value.message() and "'up'" in info.value.message()
        assert not (outside / "imported").exists() and not client.is_model_ready("up")
        client.load_model("m", config=config("m"))  # a config override alone is no upload
        assert double(client, protocol) == [2.0]
        client.close()
    token = "repo-token"
    header = {"grpc": "triton-grpc-protocol-triton-access-token", "http": "triton-access-token"}[protocol]
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--allow-model-upload",
               "--http-restricted-api", f"model-repository:triton-access-token={token}",
               "--grpc-restricted-protocol", f"model-repository:triton-access-token={token}") as server:
        client = client_for(server, protocol)
        with pytest.raises(InferenceServerException, match="restricted"):
            client.load_model("up", config=config("up"), files=files)
        assert not (outside / "imported").exists()
        client.load_model("up", config=config("up"), files=files, headers={header: token})
        assert (outside / "imported").exists()
        assert double(client, protocol, "up") == [2.0]
        client.close()


def test_allow_model_upload_needs_explicit_mode():
    for mode in ("none", "poll"):
        result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository",
                                 str(REPO / "tests" / "repositories" / "models"), "--model-control-mode", mode,
                                 "--allow-model-upload"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert "Use of '--allow-model-upload' requires setting '--model-control-mode=explicit' as well." in result.stderr


def _uploads(tmp: Path) -> list[str]:
    """The upload folders under `tmp` (the servers' run directories hold them)."""
    return sorted(p.name for p in tmp.glob("*/pytriton-model-*"))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_upload_out_of_bounds_is_refused_and_leaves_no_folder(layout, protocol):
    """Seen: a `file:` path ~1,500 folders deep failed with a RecursionError (HTTP 500, gRPC UNKNOWN) and its
    temporary folder, with the files written before it, stayed until the disk was full (not removed at stop)."""
    repo, _ = layout
    tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # (short: the server's worker socket lives under it)
    model = MODEL.encode()
    weights = b"w" * (1 << 20)
    attempts = [
        ({"file:1/model.py": model, "file:1/weights.bin": weights, "file:" + "d/" * 1500 + "x": b"x"}, "deep"),
        ({"file:1/model.py": model, "file:1/" + "n" * 2000: b"x"}, "long"),
        ({"file:1/model.py": model, **{f"file:1/f{i}": b"" for i in range(1100)}}, "many files"),
    ]
    try:
        with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--allow-model-upload",
                   env={"TMPDIR": str(tmp)}) as server:
            client = client_for(server, protocol)
            for files, what in attempts:
                with pytest.raises(InferenceServerException) as info:
                    client.load_model("up", config=config("up"), files=files)
                assert status(info) == INVALID[protocol], (what, info.value.message())
                assert "failed to load 'up'" in info.value.message(), (what, info.value.message())
                assert _uploads(tmp) == [], what
            client.load_model("up", config=config("up"), files={"file:1/model.py": model})
            assert double(client, protocol, "up") == [2.0]
            assert len(_uploads(tmp)) == 1
            client.close()
        assert _uploads(tmp) == []  # the served model's folder goes with the server's stop
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_killed_servers_upload_folder_is_swept_by_the_next_start(layout):
    """An upload's folder lives in the server's run directory: a server killed with SIGKILL cannot remove it, and the
    next server's start-up sweep does (before, uploads lay in the temporary directory itself and stayed)."""
    repo, _ = layout
    tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # (short: the server's worker socket lives under it)
    try:
        server = ServerProcess(["--model-repository", str(repo), "--model-control-mode", "explicit",
                                "--allow-model-upload"], env={"TMPDIR": str(tmp)})
        try:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            client.load_model("up", config=config("up"), files={"file:1/model.py": MODEL.encode(),
                                                                 "file:1/weights.bin": b"w" * (1 << 20)})
            assert double(client, "grpc", "up") == [2.0]
            workers = server.worker_pids()
            client.close()
        finally:
            server.stop(signal.SIGKILL)
        assert len(_uploads(tmp)) == 1  # a SIGKILLed server cannot clean up ...
        deadline = time.monotonic() + 10  # (its workers see it gone and exit)
        while any(pid_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        with serve("--model-repository", str(repo), env={"TMPDIR": str(tmp)}):
            assert _uploads(tmp) == []  # ... the next one sweeps it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_config_override_too_large_or_too_deep_is_refused(layout, protocol):
    """Seen: a 50 MB override was parsed (the server grew by ~500 MB); a deeply nested one fails in the JSON parser."""
    repo, _ = layout
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, protocol)
        for count in (1500, 3000):  # ~1.5 MiB, ~3 MiB
            big = json.loads(config("m"))
            big["parameters"] = {f"p{i}": {"string_value": "v" * 1000} for i in range(count)}
            with pytest.raises(InferenceServerException) as info:
                client.load_model("m", config=json.dumps(big))
            message = info.value.message()
            if protocol == "grpc":  # refused by the transport before it is read: the repository's message limit
                assert status(info) == "StatusCode.RESOURCE_EXHAUSTED" and "larger than max" in message, message
            elif count == 1500:  # the body is read (under the repository's body limit), the parameter is refused
                assert status(info) == "400" and "'config' parameter is" in message, message
                assert "larger than the limit of 1048576 bytes" in message, message
            else:  # refused before it is parsed
                assert status(info) == "400" and "the request is" in message and "larger than the limit" in message
        deep = config("m")[:-1] + ', "parameters": ' + '{"a": ' * 5000 + "{}" + "}" * 5000 + "}"
        with pytest.raises(InferenceServerException) as info:
            client.load_model("m", config=deep)
        assert status(info) == INVALID[protocol] and "nested deeper than" in info.value.message()
        if protocol == "http":  # a small gzip body inflating past the repository's limit: stopped as it inflates
            bomb = gzip.compress(b'{"parameters": {"config": "' + b" " * (32 << 20) + b'"}}')
            request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/m/load", data=bomb,
                                             headers={"Content-Encoding": "gzip"}, method="POST")
            with pytest.raises(urllib.error.HTTPError) as http_info:
                urllib.request.urlopen(request, timeout=30)
            answer = http_info.value.read().decode()
            assert http_info.value.code == 400 and "the request is more than" in answer, answer
        assert client.is_server_live()
        client.load_model("m", config=config("m"))
        assert double(client, protocol) == [2.0]
        client.close()


def test_model_names_with_control_characters_or_path_characters_are_refused(layout):
    """Seen: a model name with a newline was accepted and served. Refused as Triton refuses names ('..', '/', empty,
    and here control characters), in a load request and in the repository."""
    repo, _ = layout
    shutil.copytree(repo / "m", repo / "bad\nname")
    ((repo / "bad\nname") / "config.pbtxt").write_text((repo / "m" / "config.pbtxt").read_text())
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, "grpc")
        for name, problem in (("bad\nname", "control characters"), ("..", "path traversal"),
                              ("a/b", "path traversal"), ("  ", "cannot be empty")):
            with pytest.raises(InferenceServerException) as info:
                client.load_model(name)
            assert status(info) == INVALID["grpc"] and problem in info.value.message(), info.value.message()
        names = [m["name"] for m in client.get_model_repository_index(as_json=True).get("models", [])]
        assert names == ["m"]
        request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/bad%0Aname/load", data=b"{}",
                                         method="POST")
        with pytest.raises(urllib.error.HTTPError) as http_info:
            urllib.request.urlopen(request, timeout=30)
        assert http_info.value.code == 400 and "control characters" in http_info.value.read().decode()
        assert "model folder 'bad\\nname'" in server.log and "control characters" in server.log  # (skipped, said once)
        client.close()
