"""The server process that `Triton` starts (`python -m pytriton.server '<ServerConfig as JSON>'`): launched in the
workspace, its stdout passed through except for the one line that announces it is ready, and stopped with SIGINT
(killed if it outlives its exit timeout by `KILL_MARGIN_S`)."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
from typing import Any

from pytriton.config import env as _env
from pytriton.config.server import FAILED_PREFIX, READY_PREFIX, ServerConfig
from pytriton.exceptions import PyTritonRuntimeError

logger = logging.getLogger("pytriton.triton")

START_TIMEOUT_S = 120.0
KILL_MARGIN_S = 10.0


class ServerLauncher:
    """One server process started from the user's process; `info` is what it announced once ready."""

    def __init__(self, config: ServerConfig, workspace: pathlib.Path, log_file: pathlib.Path | None = None,
                 new_session: bool = False):
        """`new_session`: the server in a session of its own (a terminal's Ctrl-C reaches only its parent, which
        then stops it with one SIGINT)."""
        self.config = config
        self.log_file = log_file
        env = dict(os.environ)
        env.setdefault("GLIBC_TUNABLES", _env.MALLOC_TUNABLES)
        path = [p for p in sys.path if p]
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *path])  # the user's modules, for "module:fn" models
        stderr = open(log_file, "ab") if log_file else None  # noqa: SIM115 - the server process owns it
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "pytriton.server", config.to_json()],
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=str(workspace),
                start_new_session=new_session,
            )
        finally:
            if stderr is not None:
                stderr.close()
        self.popen = self._process  # kept after terminate(): Popen.send_signal skips a process already reaped
        self._ready_line: str | None = None
        self._failure: str | None = None  # the reason the server gave when it could not start
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_output, name="pytriton-server-output", daemon=True)
        self._reader.start()
        self.info: dict[str, Any] = {}

    def ready_or_ended(self, timeout_s: float = 0.0) -> bool:
        """Whether the ready line came, or the output ended (the process exited), within `timeout_s`; then
        wait_ready() answers at once (the info, or the error)."""
        return self._ready.wait(timeout_s)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Wait for the ready line; stop the process and raise PyTritonRuntimeError if it does not come."""
        if not self._ready.wait(timeout_s) or self._ready_line is None:
            code = self._process.poll() if self._process is not None else None
            self.terminate()
            if self._failure is not None:
                raise PyTritonRuntimeError(f"the pytriton server did not start: {self._failure}")
            raise PyTritonRuntimeError(
                f"the pytriton server did not start (exit code {code}); see its log above"
                + (f" or in {self.log_file}" if self.log_file else "")
            )
        self.info = json.loads(self._ready_line)
        return self.info

    def _read_output(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith(READY_PREFIX) and self._ready_line is None:
                self._ready_line = line[len(READY_PREFIX) :]
                self._ready.set()
            elif line.startswith(FAILED_PREFIX) and self._failure is None:
                self._failure = json.loads(line[len(FAILED_PREFIX) :])
            elif line:
                sys.stdout.write(line + "\n")
        self._ready.set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def terminate(self) -> None:
        """SIGINT, then wait for the server's own stop (bounded by its exit timeout); kill it if it overruns."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            timeout = self.config.exit_timeout_s + KILL_MARGIN_S
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("the pytriton server did not stop in %.0f s; killing it", timeout)
                process.kill()
                process.wait()
        self._reader.join(5)
        if process.stdout is not None:
            process.stdout.close()

    def kill(self) -> None:
        """Last resort (garbage collection of a Triton that was never stopped)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
