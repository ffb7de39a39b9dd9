"""Which workers the worker template may fork (pytriton/supervisor/template.py), decided without starting one."""

from __future__ import annotations

from pytriton.backends.template import environment_bytes, loaded_cuda
from pytriton.supervisor.template import startup_difference


def test_variables_read_at_process_start_must_match_the_templates():
    template = {"PYTHONPATH": "/a", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert startup_difference(template, {**template, "CUDA_VISIBLE_DEVICES": "GPU-1", "MY_SETTING": "x"}) == []
    assert startup_difference(template, {**template, "PYTHONPATH": "/b"}) == ["PYTHONPATH"]
    assert startup_difference(template, {**template, "OMP_NUM_THREADS": "1", "LD_PRELOAD": "x.so"}) == [
        "LD_PRELOAD", "OMP_NUM_THREADS"]
    assert startup_difference({**template, "MALLOC_ARENA_MAX": "2"}, template) == ["MALLOC_ARENA_MAX"]  # unset too


def test_the_environment_is_measured_as_the_kernel_keeps_it():
    assert environment_bytes({"A": "1", "BB": ""}) == b"A=1\0BB=\0"


def test_cuda_is_found_by_its_libraries(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05\n"
                    "7f01-7f02 r-xp 00000000 08:01 2 /usr/lib/libc.so.6\n7f02-7f03 rw-p 00000000 00:00 0 \n")
    assert "libcuda.so.535.104.05" in loaded_cuda(str(maps))
    maps.write_text("7f01-7f02 r-xp 00000000 08:01 2 /usr/lib/libc.so.6\n")
    assert not [name for name in loaded_cuda(str(maps)) if name.startswith("lib")]
