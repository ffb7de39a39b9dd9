"""Readings from /proc: a process tree, its CPU time and memory, its /dev/shm files, the machine's CPU and steal.

Every reader takes the /proc folder as `proc` (default the real one) so that tests can hand it a synthetic
tree; the parsers take the text of one file.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform

PROC = pathlib.Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -------------------------------------------------------------------------------------------- parsers ---
def parse_stat(text: str) -> list[str]:
    """The fields of /proc/PID/stat after `comm`: [0] = state (field 3), [1] = ppid (field 4), ...

    comm may hold spaces and parentheses, so the split is after the last ')'.
    """
    return text[text.rindex(")") + 2:].split()


def parse_smaps_rollup(text: str) -> tuple[int, int]:
    """(Rss, Pss) in KiB from /proc/PID/smaps_rollup."""
    rss = pss = 0
    for line in text.splitlines():
        if line.startswith("Rss:"):
            rss += int(line.split()[1])
        elif line.startswith("Pss:"):
            pss += int(line.split()[1])
    return rss, pss


def parse_vm_rss(text: str) -> int:
    """VmRSS in KiB from /proc/PID/status (0 for a zombie, which has none)."""
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def shm_paths_in_maps(text: str) -> set[str]:
    """/dev/shm files mapped, from /proc/PID/maps (a removed file keeps its name, with ' (deleted)' dropped)."""
    found = set()
    for line in text.splitlines():
        i = line.find("/dev/shm/")
        if i >= 0:
            found.add(line[i:].replace(" (deleted)", ""))
    return found


def parse_cpu_jiffies(text: str) -> list[int]:
    """The first 8 counters of the `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    parts = text.splitlines()[0].split()[1:]
    return [int(x) for x in parts[:8]]


def busy_of(jiffies: list[int]) -> int:
    """CPU time processes used: all but idle, iowait and steal."""
    return sum(jiffies) - jiffies[3] - jiffies[4] - jiffies[7]


# ------------------------------------------------------------------------------------------- readers ---
def _read(path: pathlib.Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def stat(pid: int, proc: pathlib.Path = PROC) -> list[str] | None:
    text = _read(proc / str(pid) / "stat")
    return parse_stat(text) if text else None


def descendants(root: int, proc: pathlib.Path = PROC) -> list[int]:
    """root and all its living descendants (by scanning /proc for parent pids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        st = stat(int(entry), proc)
        if st is None:
            continue
        children.setdefault(int(st[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid != root and stat(pid, proc) is None:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def start_time(pid: int, proc: pathlib.Path = PROC) -> int | None:
    """Start time in clock ticks after boot (field 22): with the pid, it names one process for good."""
    st = stat(pid, proc)
    return int(st[19]) if st else None


def cpu_seconds(pids: list[int], proc: pathlib.Path = PROC) -> float:
    """User + system CPU time of the processes (fields 14 and 15)."""
    total = 0
    for pid in pids:
        st = stat(pid, proc)
        if st:
            total += int(st[11]) + int(st[12])
    return total / CLK_TCK


def memory_kib(pids: list[int], proc: pathlib.Path = PROC) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) in KiB over pids; a process that is gone counts 0."""
    rss = pss = 0
    for pid in pids:
        text = _read(proc / str(pid) / "smaps_rollup")
        if text is not None:
            r, p = parse_smaps_rollup(text)
            rss, pss = rss + r, pss + p
    return rss, pss


def rss_kib(pid: int, proc: pathlib.Path = PROC) -> int:
    """Resident set size of one process in KiB (VmRSS; 0 if it is gone): cheaper than smaps_rollup."""
    text = _read(proc / str(pid) / "status")
    return parse_vm_rss(text) if text else 0


def cmdline(pid: int, proc: pathlib.Path = PROC) -> str:
    try:
        return (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def shm_files(pids: list[int], proc: pathlib.Path = PROC) -> set[str]:
    """/dev/shm files that the processes have mapped or open."""
    found: set[str] = set()
    for pid in pids:
        found |= shm_paths_in_maps(_read(proc / str(pid) / "maps") or "")
        try:
            fds = os.listdir(proc / str(pid) / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(proc / str(pid) / "fd" / fd)
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                found.add(target.replace(" (deleted)", ""))
    return found


def busy_jiffies(proc: pathlib.Path = PROC) -> int:
    """CPU time processes of this machine used: all but idle, iowait and steal."""
    return busy_of(parse_cpu_jiffies((proc / "stat").read_text()))


def steal_jiffies(proc: pathlib.Path = PROC) -> int:
    """CPU time the hypervisor gave to other virtual machines while ours wanted it."""
    return parse_cpu_jiffies((proc / "stat").read_text())[7]


def loadavg(proc: pathlib.Path = PROC) -> float:
    return float((proc / "loadavg").read_text().split()[0])


@dataclasses.dataclass
class Machine:
    cpu: str
    cpus: str
    memory: str
    kernel: str
    python: str


def machine_info(proc: pathlib.Path = PROC) -> Machine:
    """CPU model, CPU count, memory, kernel and Python of this machine, for the report's setup line."""
    cpu = "?"
    for line in (_read(proc / "cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    try:
        mem_kib = int((_read(proc / "meminfo") or "").split()[1])
    except (ValueError, IndexError):
        pass
    return Machine(cpu=cpu, cpus=str(os.cpu_count()), memory=f"{mem_kib / 1024 / 1024:.0f} GiB",
                   kernel=platform.release(), python=platform.python_version())
