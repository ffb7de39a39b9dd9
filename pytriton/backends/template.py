"""The worker template: `python -m pytriton.backends.template <fd> <server pid>`, a process that forks workers warm.

The server's supervisor starts it once (a fresh interpreter, as a worker would be). It imports what every worker
imports (numpy, zmq, the worker loop, both backends), freezes those objects out of the garbage collector (so that the
collector never writes to their pages and copy-on-write keeps them shared with every worker), and then waits on the
socket `fd` for fork requests. The template runs no user code, starts no thread of its own and loads no CUDA library;
it refuses to serve (says why and exits) if its imports did either.

The messages are JSON lines. The supervisor sends {"fork": id, "spec": <WorkerSpec as JSON>, "env": {...},
"cwd": dir}; the template answers {"id": id, "pid": pid} (or {"id": id, "error": why}), and {"exit": pid, "code": c}
once it has reaped a worker that ended (c: its exit code, or minus the signal that killed it, as
`subprocess.Popen.returncode`). First of all it says {"ready": pid} or {"failed": why}.

A forked worker sets its environment (CUDA_VISIBLE_DEVICES included) and working directory before it imports the
model's code, then runs exactly what `python -m pytriton.backends.worker` runs. Its parent is the template, not the
server, so it watches the server through a pidfd (WorkerSpec.watch "pidfd"); the template dying leaves it serving.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
from typing import Any

# Libraries whose presence in the template would make a fork unsafe or pin a GPU before CUDA_VISIBLE_DEVICES is set.
CUDA_LIBRARIES = ("libcuda.so", "libcudart", "libnvidia-ml", "libcublas", "libnccl")
ENV_ROOM_VARIABLE = "PYTRITON_TEMPLATE_ENV_ROOM"  # the template's padding: room for a worker's environment
ENV_ROOM = 16 * 1024
CUDA_MODULES = ("torch", "cupy", "tensorflow", "jax", "numba.cuda", "pycuda", "cuda")


def loaded_cuda(maps_path: str = "/proc/self/maps") -> list[str]:
    """The CUDA modules imported and CUDA libraries mapped in this process (none, in a template that may fork)."""
    found = sorted(name for name in CUDA_MODULES if name in sys.modules)
    try:
        with open(maps_path, encoding="utf-8", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        paths = set()
    found += sorted({os.path.basename(p) for p in paths if any(lib in os.path.basename(p) for lib in CUDA_LIBRARIES)})
    return found


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


class _Forked(Exception):
    """Raised in a forked child to leave the template's loop: the worker runs at the top of the stack, so that the
    child's exit is the ordinary one (atexit handlers, buffered output), as in a worker started fresh."""

    def __init__(self, request: dict[str, Any]):
        super().__init__("forked")
        self.request = request


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _fork(sock: socket.socket, request: dict[str, Any], children: set[int], wakeup: tuple[int, int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        _send(sock, {"id": request["fork"], "error": f"fork failed: {exc}"})
        return
    if pid == 0:  # the worker: nothing of the template's own goes with it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (the worker sets its own before it serves)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wakeup:
            os.close(fd)
        sock.close()
        raise _Forked(request)
    children.add(pid)
    pidfd = os.pidfd_open(pid)  # (opened before the worker can be reaped: its pid cannot have been reused)
    try:
        socket.send_fds(sock, [json.dumps({"id": request["fork"], "pid": pid}).encode() + b"\n"], [pidfd])
    finally:
        os.close(pidfd)


def serve_forks(sock: socket.socket, server_pid: int) -> int:
    """Answer fork requests until the supervisor closes the socket; return the template's exit code. In a forked child
    this raises _Forked instead of returning."""
    children: set[int] = set()
    template_pid = os.getpid()

    def terminated(signum: int, frame: Any) -> None:
        """SIGTERM: when the server is gone (the kernel's parent-death signal), its workers hear it at once too, as
        fresh workers do from the kernel (they would see it within a second by themselves). The pids are those of
        children not reaped yet: none can have been reused."""
        if os.getpid() != template_pid:  # (a child between fork and its own handlers)
            os._exit(128 + signum)
        if os.getppid() != server_pid:
            for child in children:
                try:
                    os.kill(child, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    wakeup = os.pipe()
    os.set_blocking(wakeup[0], False)
    os.set_blocking(wakeup[1], False)
    signal.set_wakeup_fd(wakeup[1])
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # (a handler: only then does the wakeup fd hear it)
    pending = b""
    while True:
        readable, _, _ = select.select([sock.fileno(), wakeup[0]], [], [])
        if wakeup[0] in readable:
            try:
                while os.read(wakeup[0], 512):
                    pass
            except BlockingIOError:
                pass
            _reap(sock, children)
        if sock.fileno() in readable:
            data = sock.recv(1 << 20)
            if not data:
                return 0
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line:
                    _fork(sock, json.loads(line), children, wakeup)


def environment_bytes(env: dict[str, str]) -> bytes:
    """`env` as the kernel keeps a process's environment (what /proc/<pid>/environ shows)."""
    return b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items())


def _memory_areas() -> tuple[int, int, int, int]:
    """Where this process's command line and environment lie (arg_start, arg_end, env_start, env_end)."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[45]), int(fields[46]), int(fields[47]), int(fields[48])  # fields 48-51 of proc(5)


def _overwrite(start: int, end: int, data: bytes) -> bool:
    if len(data) > end - start:
        return False
    ctypes.memmove(start, data + bytes(end - start - len(data)), end - start)
    return True


def present_as_worker(env: dict[str, str]) -> None:
    """Make this forked child look like a worker started fresh to whoever reads /proc/<pid>/cmdline and environ (an
    operator, `ps e`, scripts/wire): the kernel shows the memory the process started with, the template's. Both are
    rewritten in place (the template starts with room to spare in its environment: ENV_ROOM_VARIABLE). Called after
    os.environ was replaced, so that no C string still in use lies there."""
    arg_start, arg_end, env_start, env_end = _memory_areas()
    _overwrite(arg_start, arg_end, b"\0".join([os.fsencode(sys.executable), b"-m", b"pytriton.backends.worker",
                                               b"-"]) + b"\0")
    _overwrite(env_start, env_end, environment_bytes(env))


def _run_worker(request: dict[str, Any]) -> int:
    os.environ.clear()
    os.environ.update(request["env"])
    present_as_worker(request["env"])
    os.chdir(request["cwd"])
    from pytriton.backends import worker

    return worker.run_forked(request["spec"])


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    server_pid = int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a worker: Ctrl-C reaches the group; the server stops us
    try:
        from pytriton.backends import worker  # noqa: F401 - the common modules every worker imports
        from pytriton.backends import callable_backend, python_model  # noqa: F401

        worker.die_with_parent()
        if os.getppid() != server_pid:
            return 0
        server = os.pidfd_open(server_pid)  # (a forked worker watches the server this way: check it works here)
        os.close(server)
        problems = []
        if threading.active_count() != 1:
            problems.append(f"{threading.active_count() - 1} Python thread(s) started by its imports")
        cuda = loaded_cuda()
        if cuda:
            problems.append(f"CUDA loaded by its imports ({', '.join(cuda)})")
        if problems:
            _send(sock, {"failed": "; ".join(problems)})
            return 2
    except Exception as exc:  # noqa: BLE001 - the supervisor logs it and starts workers fresh
        _send(sock, {"failed": f"{type(exc).__name__}: {exc}"})
        return 2
    gc.collect()
    gc.freeze()  # the imported objects move to the permanent generation: no collection writes to their pages
    _send(sock, {"ready": os.getpid()})
    return serve_forks(sock, server_pid)


if __name__ == "__main__":
    _request = None
    try:
        _code = main(sys.argv[1:])
    except _Forked as forked:  # (the template's frames go with the exception: the worker keeps none of them)
        _request = forked.request
    if _request is not None:
        _code = _run_worker(_request)
    sys.exit(_code)
