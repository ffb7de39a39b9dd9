"""procfs readings on a synthetic /proc tree."""

from __future__ import annotations

import os
import pathlib

import pytest
from bench_lib import procfs


def _stat_line(pid: int, comm: str, ppid: int, utime: int = 0, stime: int = 0, start: int = 0) -> str:
    # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    # priority nice threads itrealvalue starttime ...
    rest = ["S", ppid, 0, 0, 0, -1, 0, 0, 0, 0, 0, utime, stime, 0, 0, 20, 0, 1, 0, start, 0, 0]
    return f"{pid} ({comm}) " + " ".join(str(x) for x in rest) + "\n"


def make_process(proc: pathlib.Path, pid: int, ppid: int, comm: str = "python", **kw: int) -> pathlib.Path:
    d = proc / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "stat").write_text(_stat_line(pid, comm, ppid, **kw))
    return d


@pytest.fixture
def proc(tmp_path: pathlib.Path) -> pathlib.Path:
    """init(1) -> server(10) -> workers 11, 12 -> helper 13; an unrelated 20."""
    root = tmp_path / "proc"
    make_process(root, 1, 0, "init")
    make_process(root, 10, 1, "pytriton serve", utime=300, stime=100, start=5000)
    make_process(root, 11, 10, "worker) (0", utime=50)  # comm with a parenthesis and a space
    make_process(root, 12, 10, "worker 1")
    make_process(root, 13, 12, "helper")
    make_process(root, 20, 1, "other")
    (root / "self").mkdir()  # not a pid: skipped
    return root


def test_parse_stat_after_the_last_parenthesis():
    fields = procfs.parse_stat(_stat_line(7, "a) (b c", 3, utime=9, start=77))
    assert fields[0] == "S" and fields[1] == "3" and fields[11] == "9" and fields[19] == "77"


def test_descendants(proc):
    assert sorted(procfs.descendants(10, proc)) == [10, 11, 12, 13]
    assert sorted(procfs.descendants(12, proc)) == [12, 13]
    (proc / "13" / "stat").unlink()  # gone meanwhile
    assert sorted(procfs.descendants(10, proc)) == [10, 11, 12]


def test_start_time_and_cpu(proc):
    assert procfs.start_time(10, proc) == 5000
    assert procfs.start_time(99, proc) is None
    assert procfs.cpu_seconds([10, 11, 99], proc) == pytest.approx(450 / procfs.CLK_TCK)


def test_memory(proc):
    (proc / "10" / "smaps_rollup").write_text(
        "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:               1000 kB\nPss:                600 kB\n"
        "Pss_Anon:           500 kB\n")
    (proc / "11" / "smaps_rollup").write_text("Rss: 24 kB\nPss: 20 kB\n")
    assert procfs.memory_kib([10, 11, 12, 99], proc) == (1024, 620)
    (proc / "10" / "status").write_text("Name:\tpython\nVmPeak:\t 9 kB\nVmRSS:\t   2048 kB\n")
    assert procfs.rss_kib(10, proc) == 2048
    assert procfs.rss_kib(11, proc) == 0  # no status file: gone
    (proc / "12" / "status").write_text("Name:\tzombie\nState:\tZ\n")
    assert procfs.rss_kib(12, proc) == 0


def test_shm_files_from_maps_and_fds(proc):
    (proc / "10" / "maps").write_text(
        "7f00-7f10 rw-s 00000000 00:1a 12 /dev/shm/pytriton_ab_10_arena (deleted)\n"
        "7f10-7f20 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n"
        "7f20-7f30 rw-s 00000000 00:1a 13 /dev/shm/client region\n")
    os.symlink("/dev/shm/pytriton_ab_10_ctl", proc / "11" / "fd" / "5")
    os.symlink("socket:[1234]", proc / "11" / "fd" / "6")
    assert procfs.shm_files([10, 11, 12, 99], proc) == {
        "/dev/shm/pytriton_ab_10_arena", "/dev/shm/client region", "/dev/shm/pytriton_ab_10_ctl"}


def test_machine_counters(proc):
    (proc / "stat").write_text("cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n")
    assert procfs.busy_jiffies(proc) == 100 + 5 + 50 + 3 + 2  # not idle, iowait, steal
    assert procfs.steal_jiffies(proc) == 7
    (proc / "loadavg").write_text("1.25 0.80 0.50 2/300 4242\n")
    assert procfs.loadavg(proc) == 1.25


def test_machine_info(proc):
    (proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\nflags\t: fpu\n")
    (proc / "meminfo").write_text("MemTotal:       25165824 kB\nMemFree: 1 kB\n")
    info = procfs.machine_info(proc)
    assert info.cpu == "Test CPU @ 2.0GHz" and info.memory == "24 GiB"
    assert info.cpus == str(os.cpu_count())
