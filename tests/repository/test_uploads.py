"""Models uploaded as files: written under a folder of our own; a refused upload leaves nothing behind."""

from __future__ import annotations

import os
import tempfile

import pytest

from pytriton.config.repository_limits import RepositoryLimits
from pytriton.exceptions import ServerError, Status
from pytriton.repository.uploads import write_upload


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_files_land_in_the_model_folder(temp_root):
    root, model_dir = write_upload("m", {"config.pbtxt": "name: 'm'", "1/model.py": b"x = 1\n"})
    assert model_dir.startswith(str(temp_root)) and model_dir.endswith("/m")
    with open(f"{model_dir}/1/model.py", "rb") as f:
        assert f.read() == b"x = 1\n"


@pytest.mark.parametrize("bad", ["../escape.py", "/etc/passwd", "1/../../x", ".", ""])
def test_a_path_leaving_the_folder_is_refused_and_nothing_is_left(temp_root, bad):
    with pytest.raises(ServerError, match="must be relative to the model folder"):
        write_upload("m", {"config.pbtxt": "name: 'm'", bad: b"x"})
    assert list(temp_root.iterdir()) == []


def test_a_file_that_cannot_be_written_is_refused_and_nothing_is_left(temp_root):
    with pytest.raises(ServerError, match="cannot write file"):
        write_upload("m", {"1": b"a file", "1/model.py": b"x"})  # '1' is a file, then wanted as a folder
    assert list(temp_root.iterdir()) == []


@pytest.mark.parametrize("files, problem", [
    ({"d/" * 1500 + "x": b"x"}, "is 1500 folders deep, more than the limit of 32"),
    ({"1/" + "n" * 2000: b"x"}, "bytes long, more than the limit of 1024"),
    ({f"1/f{i}": b"" for i in range(1001)}, "1001 files given ('file:' parameters), more than the limit of 1000"),
    ({"1/model.py": b"x" * 600, "1/w.bin": b"x" * 500}, "the files given hold 1100 bytes, more than the limit of 1000"),
    ({"1/model.py": 5}, "File parameter 'file:1/model.py' must have bytes type"),
])
def test_files_out_of_bounds_are_refused_before_anything_is_written(temp_root, files, problem):
    with pytest.raises(ServerError) as info:
        write_upload("m", files, RepositoryLimits(max_upload_bytes=1000))
    assert info.value.status is Status.INVALID_ARG and problem in info.value.message
    assert list(temp_root.iterdir()) == []


def test_any_error_while_writing_removes_the_folder(temp_root, monkeypatch):
    """Seen: a RecursionError (a path 1,500 folders deep, in os.makedirs) left the folder and the files written."""
    real_makedirs = os.makedirs
    calls = []

    def makedirs(path: str, exist_ok: bool = False) -> None:
        calls.append(path)
        if len(calls) > 1:  # the second file's folder: after the first file was written
            raise RecursionError("maximum recursion depth exceeded")
        real_makedirs(path, exist_ok=exist_ok)

    monkeypatch.setattr(os, "makedirs", makedirs)
    with pytest.raises(RecursionError):
        write_upload("m", {"model.py": b"x", "2/model.py": b"y"})
    assert list(temp_root.iterdir()) == []
