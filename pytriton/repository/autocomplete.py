"""Auto-complete of a repository model's configuration (Triton's default; off with `--disable-auto-complete-config` or
`--strict-model-config=true`): the model's `TritonPythonModel.auto_complete_config` completes what `config.pbtxt`
says, or the whole configuration when there is no `config.pbtxt`. It runs in a child process, never here.

A `ForkServer` runs the auto-complete of many models (a repository's, at start) at the cost of one interpreter: each
model's in a child forked from one warm process (pytriton/backends/autocomplete.py, `--fork-server`), one after
another, each child a process of its own as before. Without one, or when it cannot start or dies, or with
PYTRITON_WORKER_TEMPLATE=0, each model's auto-complete starts a fresh interpreter (the log says why)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends.child import reap
from pytriton.config.env import server_settings
from pytriton.model_config.proto_json import int64_as_numbers
from pytriton.repository.config import DEFAULT_MODEL_FILENAME, ModelRepositoryError

logger = logging.getLogger("pytriton.server")


def config_json(config: pb.ModelConfig) -> dict[str, Any]:
    """Triton's JSON form of a model configuration as a Python-backend model sees it: every plain field present
    (defaults too), enums by name, integers as numbers."""
    data: dict[str, Any]
    try:
        data = json_format.MessageToDict(config, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26
        data = json_format.MessageToDict(config, preserving_proto_field_name=True,
                                         including_default_value_fields=True)
    return int64_as_numbers(data, pb.ModelConfig.DESCRIPTOR)


def prefill(config: pb.ModelConfig, model_dir: str, versions: list[int]) -> pb.ModelConfig:
    """What Triton fills in before any backend's auto-complete: the name (the model's folder), and `backend: "python"`
    when neither backend nor platform is given and the model file is `model.py` or a version folder holds one."""
    config = pb.ModelConfig.FromString(config.SerializeToString())
    if not config.name:
        config.name = os.path.basename(os.path.normpath(model_dir))
    has_model_py = config.default_model_filename == DEFAULT_MODEL_FILENAME or any(
        os.path.isfile(os.path.join(model_dir, str(v), DEFAULT_MODEL_FILENAME)) for v in versions)
    if not config.backend and not config.platform and has_model_py:
        config.backend = "python"
    return config


class ForkServer:
    """The auto-complete fork-server (see the module's docstring): started at its first use, stopped by close()."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._replies: IO[bytes] | None = None
        self._off: str | None = None  # why models' auto-complete starts fresh interpreters
        self._lock = threading.Lock()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, model_file: str, config_path: str, answer_path: str) -> int:
        """The exit code of the child that answered for `model_file` (forked, or a fresh interpreter)."""
        with self._lock:
            if self._process is None and self._off is None:
                self._start()
            if self._process is not None:
                try:
                    return self._ask(model_file, config_path, answer_path)
                except (OSError, ValueError) as exc:
                    self._stop(f"the auto-complete fork-server failed ({exc})")
        return _run(model_file, config_path, answer_path)

    def _start(self) -> None:
        try:
            template = server_settings().get("worker_template", True)
        except ValueError:
            template = True  # (the server refuses the value itself, with its name)
        if not template:
            self._off = "PYTRITON_WORKER_TEMPLATE=0"
            logger.info("models' auto-complete starts a fresh interpreter each: %s", self._off)
            return
        try:
            self._process = subprocess.Popen([sys.executable, "-m", "pytriton.backends.autocomplete", "--fork-server",
                                              str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert self._process.stdout is not None
            self._replies = self._process.stdout
            if "ready" not in self._reply():
                raise ValueError("it did not say it was ready")
        except (OSError, ValueError) as exc:
            self._stop(f"the auto-complete fork-server could not start ({exc or type(exc).__name__})")

    def _reply(self) -> dict[str, Any]:
        assert self._replies is not None
        line = self._replies.readline()
        if not line:
            raise ValueError("it exited")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise ValueError(f"it answered {line!r}")
        return reply

    def _ask(self, model_file: str, config_path: str, answer_path: str) -> int:
        assert self._process is not None and self._process.stdin is not None
        request = {"model_file": model_file, "config_path": config_path, "answer_path": answer_path}
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        return int(self._reply()["code"])

    def _stop(self, why: str) -> None:
        self._off = why
        logger.warning("%s; models' auto-complete starts a fresh interpreter each", why)
        self.close()

    def close(self) -> None:
        """Stop the fork-server (its stdin closes: it exits) and wait for it."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            reap(process)
        if process.stdout is not None:
            process.stdout.close()


def auto_complete(config: pb.ModelConfig, model_file: str, forks: ForkServer | None = None) -> pb.ModelConfig:
    """`config` as the model's `auto_complete_config` completes it (unchanged when it has none); ModelRepositoryError
    naming the model and its file if it raises or returns something that is no configuration. `forks` runs it in a
    child of a fork-server; without one, in a fresh interpreter."""
    name = config.name
    with tempfile.TemporaryDirectory(prefix="pytriton-autocomplete-") as directory:
        config_path = os.path.join(directory, "config.json")
        answer_path = os.path.join(directory, "answer.json")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config_json(config), f)
        returncode = (forks.run if forks is not None else _run)(model_file, config_path, answer_path)
        try:
            with open(answer_path, encoding="utf-8") as f:
                answer = json.load(f)
        except (OSError, ValueError):
            raise ModelRepositoryError(f"auto-complete of model '{name}': the process running its "
                                       f"auto_complete_config exited with code {returncode} before it answered "
                                       "(see the log)") from None
    if "error" in answer:
        trace = answer.get("traceback", "")
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) failed: {answer['error']}"
                                   + (f"\n{trace.rstrip()}" if trace else ""))
    completed = answer.get("config")
    if completed is None:
        return config
    try:
        result = json_format.ParseDict(completed, pb.ModelConfig())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) returned an invalid model "
                                   f"configuration: {exc}") from None
    if result.name != name:
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) changed the model's name "
                                   f"to '{result.name}'")
    return result


def _run(model_file: str, config_path: str, answer_path: str) -> int:
    """Run the auto-complete process to its end; it dies with this process (PR_SET_PDEATHSIG)."""
    process = subprocess.Popen([sys.executable, "-m", "pytriton.backends.autocomplete", model_file, config_path,
                                answer_path, str(os.getpid())])
    try:
        return process.wait()
    finally:
        reap(process)


__all__ = ["ForkServer", "auto_complete", "config_json", "prefill"]
