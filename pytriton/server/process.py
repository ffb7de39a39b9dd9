"""The server process: a composed `Server` run on its event loop (uvloop's where it can) until SIGINT/SIGTERM or
its parent's exit, then stopped gracefully; its heap frozen once it serves. `python -m pytriton.server` (what
`Triton` starts, announcing its ports on stdout) and `pytriton serve` both run a server here.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from pytriton.config.server import FAILED_PREFIX, READY_PREFIX, ServerConfig
from pytriton.exceptions import PyTritonError
from pytriton.server.composition import STOP_OVERRUN_S, Server

logger = logging.getLogger("pytriton.server")


async def _watch_parent(stop: Callable[[], None], period_s: float = 0.5) -> None:
    """Stop the server when the process that started it is gone (it was re-parented)."""
    parent = os.getppid()
    while True:
        await asyncio.sleep(period_s)
        if os.getppid() != parent:
            logger.warning("the parent process (pid %d) is gone; stopping", parent)
            stop()
            return


async def serve_until_signal(config: ServerConfig, on_ready: Callable[[Server], None] | None = None,
                             ignore_late_signals: bool = False) -> None:
    """Run a server until SIGINT or SIGTERM, then stop it gracefully; a second signal skips the drain. With
    `ignore_late_signals` (the process entry points, which exit next) SIGINT and SIGTERM do nothing afterwards when a
    signal (or the parent's exit) stopped the server."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    server = Server(config)

    def on_signal() -> None:
        if stop.is_set():
            logger.warning("second signal: not waiting for in-flight requests any longer")
            if server.core is not None:
                server.core.cancel_drain()
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    watchdog = asyncio.ensure_future(_watch_parent(on_signal)) if config.exit_with_parent else None
    try:
        start = asyncio.ensure_future(server.start())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            logger.info("signal received while starting; stopping")
            start.cancel()
            await asyncio.gather(start, return_exceptions=True)
            return
        start.result()
        if on_ready is not None:
            on_ready(server)
        await stopped
        logger.info("signal received; stopping within %.0f s (the exit timeout)", config.exit_timeout_s)
        try:  # every step of a stop is bounded by its deadline; this only guards against a bug of ours
            await asyncio.wait_for(server.stop(), config.exit_timeout_s + STOP_OVERRUN_S)
        except asyncio.TimeoutError:
            logger.error("the server did not stop within the exit timeout (%.0f s); exiting anyway",
                         config.exit_timeout_s)
    finally:
        if watchdog is not None:
            watchdog.cancel()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
            if ignore_late_signals and stop.is_set():  # (stopped by a signal: a second may be on its way)
                # The process is done serving: a signal that comes late (a second Ctrl-C, a supervisor's SIGINT while
                # the loop closes) must not turn a clean stop into a KeyboardInterrupt (exit 1) or a kill (-15). A
                # handler, not SIG_IGN: processes started later must not inherit an ignored signal.
                signal.signal(signum, _late_signal)


def _late_signal(signum: int, frame: Any) -> None:
    """SIGINT or SIGTERM after the server stopped: nothing to do (see serve_until_signal)."""


# The collector's first threshold in the server process (Python's default: 700). The request path leaves no cyclic
# garbage (docs/profile.md, "Front-end and core, second pass"), but at high concurrency the objects of the requests in
# flight (a few thousand at c = 64-256) pass 700 new objects between two answers many times a second: each pass scanned
# them all and moved them to older generations (~1.4 us per small request at gRPC c=64). At 10,000 such a collection
# is rare; cyclic garbage from other paths still goes within 10,000 allocations (~1 MB of small objects).
GC_THRESHOLD = 10_000


def _freeze_heap(server: Server) -> None:
    """A process of its own: move what start-up allocated out of the collector's sight (gc.freeze), so later
    collections scan only what requests allocate, and collect young objects less often (`GC_THRESHOLD`)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)


def run_loop(config: ServerConfig, main: Coroutine[Any, Any, None]) -> None:
    """Run `main` to completion on a new event loop of the kind `config.event_loop` names (PYTRITON_EVENT_LOOP):
    uvloop's for "uvloop", and for "auto" where uvloop is installed and no port serves TLS (every unbatched request
    wakes the loop about three times; uvloop's wake-ups cost fewer Python steps); asyncio's own otherwise. TLS ports
    run on asyncio's loop: their handshake (frontend/tls.py) is built on its `start_tls`."""
    tls = config.grpc_tls is not None or config.http_tls is not None or config.openai_tls is not None
    if config.event_loop == "uvloop" and tls:
        main.close()
        raise RuntimeError("PYTRITON_EVENT_LOOP=uvloop cannot serve a TLS port (its handshake needs asyncio's loop); "
                           "use auto or asyncio")
    if config.event_loop != "asyncio" and not tls:
        try:
            import uvloop
        except ImportError:
            if config.event_loop == "uvloop":
                main.close()
                raise RuntimeError("PYTRITON_EVENT_LOOP=uvloop, but uvloop is not installed (pip install uvloop)"
                                   ) from None
        else:
            uvloop.run(main)
            return
    asyncio.run(main)


def run(config: ServerConfig) -> None:
    """Blocking entry point used by the CLI."""
    run_loop(config, serve_until_signal(config, on_ready=_freeze_heap, ignore_late_signals=True))


def _announce(server: Server) -> None:
    """One line on stdout that a parent process (pytriton.triton.Triton) waits for."""
    assert server.host is not None
    info = {
        "grpc_port": server.grpc_port,
        "http_port": server.http_port,
        "metrics_port": server.metrics_port,
        "openai_port": server.openai_port,
        "address": server.host.address,
        "tag": server.tag,
        "pid": os.getpid(),
        "inline_max": server.host.inline_max,
    }
    sys.stdout.write(READY_PREFIX + json.dumps(info) + "\n")
    sys.stdout.flush()
    _freeze_heap(server)


def main(argv: list[str] | None = None) -> int:
    """`python -m pytriton.server '<ServerConfig as JSON>'`: the server process that `Triton.run()` starts."""
    args = sys.argv[1:] if argv is None else argv
    config = ServerConfig.from_json(args[0])
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        run_loop(config, serve_until_signal(config, on_ready=_announce, ignore_late_signals=True))
    except (OSError, RuntimeError, PyTritonError) as exc:
        sys.stderr.write(f"pytriton server failed to start: {exc}\n")
        sys.stdout.write(FAILED_PREFIX + json.dumps(str(exc)) + "\n")  # for Triton's exception
        sys.stdout.flush()
        return 1
    return 0


__all__ = ["main", "run", "run_loop", "serve_until_signal"]
