"""`python -m pytriton.backends.autocomplete MODEL_FILE CONFIG_FILE ANSWER_FILE [PARENT_PID]`: import a repository
model's `model.py` in a short-lived process, call `TritonPythonModel.auto_complete_config` on the configuration read
from CONFIG_FILE (Triton's JSON form) and write the completed configuration, or the error, to ANSWER_FILE, so that
the server process never runs the model's code.

`python -m pytriton.backends.autocomplete --fork-server PARENT_PID`: the same for many models at the cost of one
interpreter. The process imports what auto-complete and most models import (numpy, pb_utils), says {"ready": pid} on
its stdout, then reads requests from its stdin, one JSON line each: {"model_file", "config_path", "answer_path"}.
For each it forks a child that does what the one-model form does, waits for it and answers {"code": c} (its exit
code, or minus the signal that killed it). One child at a time, each a process of its own: a model that crashes,
exits or prints cannot touch the next model's answer. It exits when its stdin closes or its parent dies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from pytriton.backends import pb_utils
from pytriton.backends.describe import _die_with_parent
from pytriton.backends.pb_autocomplete import ModelConfig
from pytriton.backends.target import exec_model_module, user_traceback

PB_UTILS_MODULE = "triton_python_backend_utils"


class InvalidResult(Exception):
    """auto_complete_config returned something other than the ModelConfig (reported without the type's name)."""


def auto_complete(model_file: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """The configuration `TritonPythonModel.auto_complete_config` returns for `config`, or None when the model has no
    such method; raises what the model raises, ValueError when it returns something other than a ModelConfig."""
    sys.modules.setdefault(PB_UTILS_MODULE, pb_utils)
    pb_utils._model_dir = os.path.dirname(os.path.abspath(model_file))  # (pb_utils.get_model_dir)
    name = config.get("name", "")
    module = exec_model_module(model_file, f"_pytriton_autocomplete_{name}")
    model_class = getattr(module, "TritonPythonModel", None)
    if model_class is None:
        raise AttributeError(f"'{model_file}' defines no class TritonPythonModel")
    method = getattr(model_class, "auto_complete_config", None)
    if method is None:
        return None
    result = method(ModelConfig(config))
    if not isinstance(result, ModelConfig):
        raise InvalidResult(f"auto_complete_config function in model '{name}' must return a valid pb.ModelConfig "
                            f"object (it returned {type(result).__name__}).")
    return result.as_dict()


def answer(model_file: str, config_path: str, answer_path: str) -> None:
    """Auto-complete the model of `model_file` (what it prints goes to stderr) and write the answer file."""
    os.dup2(2, 1)  # what the model prints goes to stderr
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        result: dict[str, Any] = {"config": auto_complete(model_file, config)}
        json.dumps(result)  # a config that is not JSON is the model's error, reported as such
    except InvalidResult as exc:
        result = {"error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the model's error (even SystemExit) is the answer
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": user_traceback(exc)}
    # The answer goes to a file, read once this process has exited: a process the model forked may hold our pipes.
    with open(answer_path, "w", encoding="utf-8") as out:
        out.write(json.dumps(result))


def _forked_answer(request: dict[str, Any], server: int) -> None:
    """In the child: leave the fork-server's pipes alone, die with the fork-server, answer, exit at once."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # (as in a fresh interpreter)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        _die_with_parent(server)
        answer(request["model_file"], request["config_path"], request["answer_path"])
        code = 0
    finally:
        sys.stderr.flush()
        os._exit(code)  # threads the model started must not keep this process alive


def fork_server(parent: int) -> int:
    """Answer auto-complete requests on stdin, each in a forked child (see the module's docstring)."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the child hears it, the loader stops us
    try:
        import numpy  # noqa: F401 - most models import it: each child finds it imported
    except ImportError:
        pass
    requests, replies = sys.stdin.buffer, os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # (nothing printed here may garble the replies)
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        sys.stderr.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            replies.close()
            _forked_answer(request, server)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[0] == "--fork-server":
        return fork_server(int(args[1]))
    model_file, config_path, answer_path = args[0], args[1], args[2]
    _die_with_parent(int(args[3]) if len(args) > 3 else 0)
    answer(model_file, config_path, answer_path)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # threads the model started must not keep this process alive
