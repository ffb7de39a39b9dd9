"""Inside network and mount namespaces of its own (tests/_support/triton_qa.py starts it under `unshare --net
--mount`): brings the loopback up, mounts a /dev/shm of its own, starts `pytriton serve` on Triton's default ports,
and once the server is ready runs the spec's steps: one of Triton's test files with pytest (or as `python3 file.py`,
unittest's runner), or a command. Then it stops the server and writes report.json (with what was left in /dev/shm),
server.log, client.N.log (the output of step N) and junit.N.xml (of step N, when it ran the file) to the
`out` folder.

    python -m tests._support.triton_qa_driver '<json spec>'
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from tests._support.logs import READY_LINE

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_READY_TIMEOUT_S = 180.0
_STOP_TIMEOUT_S = 60.0


def loopback_up() -> None:
    """Set `lo` up: a new network namespace has it down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def private_dev_shm() -> None:
    """Mount an empty tmpfs on /dev/shm (the namespace's own, `unshare --mount`): Triton's shm_util.ShmLeakDetector
    watches every `triton_python_backend_shm_region*` there, and a real tritonserver run elsewhere on this machine
    would otherwise put its pool regions in the client's view."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"], check=True)


def _test_command(spec: dict, test_file: Path, tests: list[str], junit: Path) -> list[str]:
    if spec["runner"] == "unittest":  # (as `python3 file.py`: a TestResultCollector needs unittest's run)
        return [spec["client_python"], str(test_file), "-v", *(name.replace("::", ".") for name in tests)]
    targets = [f"{test_file}::{name}" for name in tests] or [str(test_file)]
    return [spec["client_python"], "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-v",
            f"--junitxml={junit}", *targets]


def _copy_until_ready(stream: IO[str], log: IO[str], ready: threading.Event) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        if READY_LINE in line:
            ready.set()
    ready.set()  # the server ended: nothing more to wait for


def main(spec: dict) -> int:
    out = Path(spec["out"])
    loopback_up()
    private_dev_shm()
    env = dict(os.environ, **spec["env"])
    env["PYTHONPATH"] = os.pathsep.join([*spec["pythonpath"], env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    server_env = dict(os.environ, **spec["env"], PYTRITON_EXIT_WITH_PARENT="1")
    report = {"ready": False, "client_rc": None, "server_rc": None}
    server_cwd = out / "server"  # (what the server writes by a relative name, e.g. a trace file, stays in the run)
    server_cwd.mkdir()
    with open(out / "server.log", "w") as server_log:
        server = subprocess.Popen(
            [sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", spec["repository"],
             *spec["server_args"]],
            cwd=server_cwd, env=server_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()
        assert server.stdout is not None
        reader = threading.Thread(target=_copy_until_ready, args=(server.stdout, server_log, ready), daemon=True)
        reader.start()
        try:
            ready.wait(_READY_TIMEOUT_S)
            report["ready"] = server.poll() is None and ready.is_set()
            if report["ready"]:
                test_file = Path(spec["test_file"])
                cwd = test_file.parent
                if spec.get("server_log_name"):  # (the client runs where the server's log has the name it reads)
                    cwd = out / "cwd"
                    cwd.mkdir()
                    (cwd / spec["server_log_name"]).symlink_to(out / "server.log")
                deadline = time.monotonic() + spec["client_timeout_s"]
                # (what a command step may need: the server's pid, and its log so far)
                step_env = dict(env, PYTRITON_QA_SERVER_PID=str(server.pid),
                                PYTRITON_QA_SERVER_LOG=str(out / "server.log"))
                for number, step in enumerate(spec["steps"]):
                    if "command" in step:
                        command, step_cwd, step_environ = step["command"], None, step_env
                    else:
                        command = _test_command(spec, test_file, step["tests"], out / f"junit.{number}.xml")
                        step_cwd, step_environ = cwd, env
                    with open(out / f"client.{number}.log", "w") as client_log:
                        client = subprocess.Popen(command, cwd=step_cwd, env=step_environ, stdout=client_log,
                                                  stderr=subprocess.STDOUT)
                        try:
                            rc = client.wait(max(deadline - time.monotonic(), 1.0))
                        except subprocess.TimeoutExpired:  # (a test that hangs: its outcomes so far are kept)
                            client.kill()
                            rc = client.wait()
                            client_log.write(f"\n[triton_qa_driver] killed after {spec['client_timeout_s']} s\n")
                    if "tests" in step:
                        report["client_rc"] = report["client_rc"] or rc
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
            report["server_rc"] = server.returncode
            report["shm_left"] = sorted(os.listdir("/dev/shm"))  # (what the server and the client left behind)
            reader.join(10)
    (out / "report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
