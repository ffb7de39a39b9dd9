"""A signal that reaches the server process after it stopped (a second Ctrl-C, a supervisor's SIGINT while the loop
closes) leaves the clean stop clean: SIGINT and SIGTERM are ignored once `serve_until_signal` returns."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import asyncio, os, signal
from pytriton.app import run_loop, serve_until_signal
from pytriton.server_config import ServerConfig

def ready(server):
    os.kill(os.getpid(), signal.SIGINT)  # the first signal: a graceful stop

config = ServerConfig(models=[], grpc_port=0, http_port=0, metrics_port=0, event_loop=os.environ["LOOP"])
run_loop(config, serve_until_signal(config, on_ready=ready))
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
os.kill(os.getpid(), signal.SIGINT)  # late signals: ignored
os.kill(os.getpid(), signal.SIGTERM)
print("stopped cleanly")
"""


def test_signals_after_the_stop_are_ignored():
    for loop in ("asyncio", "auto"):
        done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env={"LOOP": loop, "PATH": ""},
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout.strip()) == (0, "stopped cleanly"), (loop, done.stderr[-2000:])
