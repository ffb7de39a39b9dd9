"""Models uploaded as files: written under a folder of our own; a refused upload leaves nothing behind."""

from __future__ import annotations

import tempfile

import pytest

from pytriton.exceptions import ServerError
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
