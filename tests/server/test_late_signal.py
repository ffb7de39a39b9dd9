"""A signal that reaches the server process after it stopped (a second Ctrl-C, a supervisor's SIGINT while the loop
closes) leaves the clean stop clean: with `ignore_late_signals` (as the CLI and `python -m pytriton.server` run it)
SIGINT and SIGTERM do nothing once `serve_until_signal` returns; a process started afterwards still hears them."""

from __future__ import annotations

import subprocess
import sys

from tests._support.paths import REPO

SCRIPT = """
import asyncio, os, signal
from pytriton.server.process import run_loop, serve_until_signal
from pytriton.config.server import ServerConfig

def ready(server):
    os.kill(os.getpid(), signal.SIGINT)  # the first signal: a graceful stop

config = ServerConfig(models=[], grpc_port=0, http_port=0, metrics_port=0, event_loop=os.environ["LOOP"])
run_loop(config, serve_until_signal(config, on_ready=ready, ignore_late_signals=True))
assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL, signal.default_int_handler)
import subprocess, sys
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
child.terminate()
assert child.wait(10) == -signal.SIGTERM  # (not inherited as ignored)
os.kill(os.getpid(), signal.SIGINT)  # late signals: ignored
os.kill(os.getpid(), signal.SIGTERM)
print("stopped cleanly")
"""


def test_signals_after_the_stop_are_ignored():
    for loop in ("asyncio", "auto"):
        done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env={"LOOP": loop, "PATH": ""},
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout.strip()) == (0, "stopped cleanly"), (loop, done.stderr[-2000:])
