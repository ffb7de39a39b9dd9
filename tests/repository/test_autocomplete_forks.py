"""A repository's auto-complete through the fork-server: every model's auto_complete_config runs in a child forked
from one warm process (not one fresh interpreter per model), each child still a process of its own, with the errors
of the one-process-per-model path; fresh interpreters again when the fork-server is gone or the template is off."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from pytriton.repository import ModelRepositoryError, load_repositories, load_versions
from pytriton.repository.autocomplete import ForkServer
from tests._support.serving import serve

# A model whose auto_complete_config notes its parent process in parents.txt, then runs BODY, then completes.
MODEL = """import os
import sys
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(c):
        with open(os.path.join(pb_utils.get_model_dir(), "..", "parents.txt"), "a") as f:
            f.write(f"{{os.getppid()}}\\n")
{body}
        c.add_output({{"name": "Y", "data_type": "TYPE_FP32", "dims": [1]}})
        return c
"""


def write(root: Path, name: str, body: str = "        pass") -> str:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(MODEL.format(body=body))
    return str(root / name)


def parents(model_dir: str) -> list[int]:
    return [int(p) for p in (Path(model_dir) / "1" / ".." / "parents.txt").read_text().split()]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_repository_is_auto_completed_in_children_of_one_process(tmp_path):
    dirs = [write(tmp_path, f"m{i}") for i in range(3)]
    models = load_repositories([str(tmp_path)])
    assert [[t.name for t in m.config.outputs] for m in models] == [["Y"]] * 3
    seen = {p for d in dirs for p in parents(d)}
    assert len(seen) == 1 and os.getpid() not in seen  # one fork-server, not this process, was their parent
    assert gone(seen.pop())  # and it was stopped with the load


def test_errors_keep_their_wording_and_the_next_model_is_completed(tmp_path):
    exits = write(tmp_path, "exits", "        os._exit(3)")
    raises = write(tmp_path, "raises", "        raise RuntimeError('boom')")
    killed = write(tmp_path, "killed", "        import signal; os.kill(os.getpid(), signal.SIGKILL)")
    prints = write(tmp_path, "prints", "        print('{\"code\": 0}'); os.write(1, b'junk\\n'); sys.stdout.flush()")
    with ForkServer() as forks:
        with pytest.raises(ModelRepositoryError, match="auto-complete of model 'exits': the process running its "
                                                       "auto_complete_config exited with code 3 before it answered"):
            load_versions(exits, forks=forks)
        with pytest.raises(ModelRepositoryError, match=r"auto_complete_config of model 'raises' \(.*model.py\) "
                                                       "failed: RuntimeError: boom"):
            load_versions(raises, forks=forks)
        with pytest.raises(ModelRepositoryError, match="auto-complete of model 'killed': the process running its "
                                                       "auto_complete_config exited with code -9 before it answered"):
            load_versions(killed, forks=forks)
        assert [t.name for t in load_versions(prints, forks=forks)[0].config.outputs] == ["Y"]
    seen = {p for d in (exits, raises, killed, prints) for p in parents(d)}
    assert len(seen) == 1 and os.getpid() not in seen


def test_a_fork_server_that_died_is_replaced_by_fresh_interpreters(tmp_path, caplog):
    first, second = write(tmp_path, "first"), write(tmp_path, "second")
    with ForkServer() as forks:
        load_versions(first, forks=forks)
        os.kill(parents(first)[0], 9)
        with caplog.at_level(logging.WARNING, logger="pytriton.server"):
            assert [t.name for t in load_versions(second, forks=forks)[0].config.outputs] == ["Y"]
    assert parents(second) == [os.getpid()]
    assert "the auto-complete fork-server failed" in caplog.text
    assert "models' auto-complete starts a fresh interpreter each" in caplog.text


def test_a_ctrl_c_to_the_fork_server_leaves_it_serving(tmp_path):
    """Ctrl-C reaches the whole process group: the loader decides whether to stop, the fork-server does not die."""
    first, second = write(tmp_path, "first"), write(tmp_path, "second")
    with ForkServer() as forks:
        load_versions(first, forks=forks)
        os.kill(parents(first)[0], signal.SIGINT)
        load_versions(second, forks=forks)
    assert parents(second) == parents(first)


def test_with_the_template_off_each_model_starts_a_fresh_interpreter(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PYTRITON_WORKER_TEMPLATE", "0")
    dirs = [write(tmp_path, f"m{i}") for i in range(2)]
    with caplog.at_level(logging.INFO, logger="pytriton.server"):
        load_repositories([str(tmp_path)])
    assert [p for d in dirs for p in parents(d)] == [os.getpid()] * 2
    assert "fresh interpreter each: PYTRITON_WORKER_TEMPLATE=0" in caplog.text


@pytest.mark.parametrize("mode", [["--model-control-mode", "none"],
                                  ["--model-control-mode", "explicit", "--load-model", "*"]])
def test_a_served_repository_is_auto_completed_by_one_fork_server(tmp_path, mode):
    """`pytriton serve`: the models loaded at start, in mode none as in mode explicit, are auto-completed in children
    of one process that is neither the server nor left behind."""
    dirs = [write(tmp_path, f"m{i}") for i in range(2)]
    with serve("--model-repository", str(tmp_path), *mode) as server:
        assert server.wait_for_log("model 'm1' version 1 ready")
        seen = {p for d in dirs for p in parents(d)}
        assert len(seen) == 1 and server.process.pid not in seen
        assert gone(seen.pop())
