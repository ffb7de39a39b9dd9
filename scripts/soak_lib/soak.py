"""Soak pytriton: mixed gRPC/HTTP load, 16 floats and 1 MiB, with and without system shared memory, with
clients that cancel, against a `pytriton serve` it starts itself; bounded in time and in request count.

Run through ``scripts/soak`` (``--help`` for the options). It fails (exit status 1) on any error that is not a
deliberate cancellation, a pending-request gauge not back at 0, RSS growth past a limit, anything the server
leaves behind, or a server that does not stop cleanly. Results: ``result.json`` and ``summary.txt`` in the
output folder, with the server's log.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import random
import signal
import sys
import time

if __package__ in (None, ""):  # run as a file (scripts/soak): import the packages from scripts/
    _HERE = pathlib.Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from soak_lib import chaos
from soak_lib.chaos_faults import FAULT_KINDS
from soak_lib.clients import ClientSpec, KindMix
from soak_lib.load import Load, drain_pending
from soak_lib.requests import ALL_KINDS
from soak_lib.result import SoakResult, SoakSettings, summary, to_json_dict, verdict
from soak_lib.server import REPO, SoakServer
from soak_lib.tally import Tally

PROBE_KINDS = ["grpc-small", "http-small", "grpc-1mib-shm", "http-1mib-shm"]


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/soak", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0,
                   help="load duration in all phases together; a hard stop follows (default 10)")
    p.add_argument("--concurrency", type=int, help="requests in flight in all (default 64; --chaos: 16)")
    p.add_argument("--processes", type=int, help="client processes sharing the concurrency (default 4; --chaos: 2)")
    p.add_argument("--aio-slots", type=int, default=2,
                   help="of each process's share: concurrent grpc.aio tasks (the rest are threads; default 2)")
    p.add_argument("--cancel-share", type=float, default=0.25,
                   help="share of requests that cancel: deadlines of 0.5-2 ms, closed connections, cancelled "
                   "aio tasks (default 0.25)")
    p.add_argument("--kinds", default=",".join(ALL_KINDS),
                   help="comma-separated kinds of request to send (default: all): " + ", ".join(ALL_KINDS))
    p.add_argument("--request-timeout", type=float, default=20.0,
                   help="seconds an ordinary request may take before it counts as an error (default 20)")
    p.add_argument("--max-requests", type=int, default=5_000_000, help="stop after this many requests in all")
    p.add_argument("--rss-growth-limit-mib", type=float, default=128.0,
                   help="fail when server + worker RSS grows more than this after the warm-up (default 128)")
    p.add_argument("--warmup", type=float, help="seconds of load before the RSS growth readings "
                   "(default: 10 %% of a phase, 10-60 s)")
    p.add_argument("--stop-on-wedge", type=float, default=60.0,
                   help="end the load early when nothing succeeded for this many seconds while requests are "
                   "pending (0: never; default 60)")
    p.add_argument("--instances", type=int, default=2, help="model instances (worker processes; default 2)")
    p.add_argument("--batching", default="dynamic,off",
                   help="phases, one after the other, each with a server of its own and its share of the minutes: "
                   "`dynamic` (dynamic batcher, max batch 64) and/or `off` (each request runs on its own: another "
                   "scheduler path); default dynamic,off")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS/progress readings")
    p.add_argument("--out-dir", type=pathlib.Path, help="default .bench/soak/<UTC time>")
    p.add_argument("--python", type=pathlib.Path, default=REPO / ".venv" / "bin" / "python",
                   help="interpreter that runs the server")
    p.add_argument("--seed", type=int, default=0)
    chaos = p.add_argument_group(
        "chaos (--chaos)", "value-checked load on a plain model, an ensemble and a BLS model of a repository while "
        "workers are killed, models loaded again and regions re-registered (docs/soak.md, 'Chaos under load')")
    chaos.add_argument("--chaos", action="store_true", help="run the chaos soak instead of the soak")
    chaos.add_argument("--frontend-processes", type=int, default=1,
                       help="above 1: a second phase (a quarter of the minutes) served by that many front-end "
                       "processes, one of which is SIGKILLed at two thirds of it (default 1: no such phase)")
    chaos.add_argument("--chaos-phases", default=None,
                       help="the phases to run, comma-separated: explicit and/or group (default: explicit, and group "
                       "too with --frontend-processes above 1); with both, group gets a quarter of the minutes")
    chaos.add_argument("--execution-timeout", type=float, default=5.0,
                       help="the server's --execution-timeout, seconds (default 5)")
    chaos.add_argument("--hang-margin", type=float, default=10.0,
                       help="every call's client timeout is the execution timeout + this; a call without an answer "
                       "by then is a hang (default 10 s)")
    chaos.add_argument("--fault-interval", type=float, default=2.0,
                       help="mean seconds between two faults (default 2)")
    chaos.add_argument("--faults", default=",".join(FAULT_KINDS),
                       help="comma-separated fault kinds (default: all): " + ", ".join(FAULT_KINDS))
    chaos.add_argument("--fd-growth-limit", type=int, default=32,
                       help="fail when the server's open fds at the end exceed those at ready by more (default 32)")
    args = p.parse_args(argv)
    if args.concurrency is None:
        args.concurrency = 16 if args.chaos else 64
    if args.processes is None:
        args.processes = 2 if args.chaos else 4
    args.faults = [k for k in args.faults.split(",") if k]
    if not args.faults or set(args.faults) - set(FAULT_KINDS):
        p.error(f"--faults: known kinds are {', '.join(FAULT_KINDS)}")
    if args.execution_timeout <= 0 or args.hang_margin <= 0 or args.fault_interval <= 0:
        p.error("--execution-timeout, --hang-margin and --fault-interval must be positive")
    if args.frontend_processes < 1:
        p.error("--frontend-processes must be at least 1")
    if args.chaos_phases is None:
        args.chaos_phases = ["explicit"] + (["group"] if args.frontend_processes > 1 else [])
    else:
        args.chaos_phases = [k for k in args.chaos_phases.split(",") if k]
        if not args.chaos_phases or set(args.chaos_phases) - {"explicit", "group"}:
            p.error("--chaos-phases: explicit, group or both (comma-separated)")
        if "group" in args.chaos_phases and args.frontend_processes < 2:
            p.error("--chaos-phases group needs --frontend-processes 2 or more")
    args.client_timeout = args.execution_timeout + args.hang_margin
    if args.concurrency < args.processes or args.processes < 1:
        p.error("--concurrency must be at least --processes (and that at least 1)")
    if not 0 <= args.cancel_share <= 1:
        p.error("--cancel-share is a share: 0 to 1")
    args.kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(args.kinds) - set(ALL_KINDS)
    if unknown or not args.kinds:
        p.error(f"unknown kind(s) {sorted(unknown)}; known: {', '.join(ALL_KINDS)}")
    if args.minutes <= 0 or args.request_timeout <= 0:
        p.error("--minutes and --request-timeout must be positive")
    args.batching = [b for b in args.batching.split(",") if b]
    if not args.batching or set(args.batching) - {"dynamic", "off"}:
        p.error("--batching: dynamic, off or both (comma-separated)")
    args.started = dt.datetime.now(dt.timezone.utc)
    if args.out_dir is None:
        args.out_dir = REPO / ".bench" / "soak" / (args.started.strftime("%Y%m%dT%H%M%SZ") + ("-chaos" if args.chaos else ""))
    return args


def plan_clients(args: argparse.Namespace, max_requests: int, grpc_url: str, http_url: str, deadline: float,
                 region_prefix: str) -> list[ClientSpec]:
    """The client processes: the concurrency split as evenly as it goes, each with up to --aio-slots tasks."""
    mix = KindMix(args.kinds, args.cancel_share)
    specs = []
    for i in range(args.processes):
        share = args.concurrency // args.processes + (1 if i < args.concurrency % args.processes else 0)
        if not mix.has_aio:
            aio = 0
        elif not mix.has_sync:
            aio = share
        else:
            aio = min(args.aio_slots, share - 1)  # at least one thread for the kinds of the sync clients
        specs.append(ClientSpec(
            index=i, grpc_url=grpc_url, http_url=http_url, sync_slots=share - aio, aio_slots=aio,
            mix=mix, timeout_s=args.request_timeout, deadline=deadline,
            max_requests=max_requests // args.processes + (1 if i < max_requests % args.processes else 0),
            region_prefix=f"{region_prefix}{i}_", seed=args.seed * 100 + i,
        ))
    return specs


def run_load(args: argparse.Namespace, server: SoakServer, result: SoakResult, region_prefix: str) -> None:
    """The load phase: clients run until the minutes are up, the count is reached or the model wedges."""
    minutes = result.settings.minutes
    t0 = time.monotonic()
    deadline_wall = time.time() + minutes * 60
    load = Load(plan_clients(args, result.settings.max_requests, server.grpc_url, server.http_url, deadline_wall,
                             region_prefix))
    load.start()
    log(f"load: {args.concurrency} in flight from {args.processes} processes for up to {minutes:g} min")
    last_ok, last_progress = 0, time.monotonic()
    try:
        while time.time() < deadline_wall and not load.all_finished():
            next_sample = time.monotonic() + args.sample_every
            while time.monotonic() < next_sample and not load.all_finished():
                load.drain(wait_s=next_sample - time.monotonic())
            now = time.monotonic()
            reading = server.rss(now - t0)
            pending = server.pending()
            if reading is None:
                result.stopped_early = "the server process exited during the load"
                break
            result.rss.append(reading)
            if pending is not None:
                result.pending_max = max(result.pending_max or 0, pending)
            ok, cancelled, errors = load.tally().totals()
            log(f"  {now - t0:5.0f} s: ok {ok}, cancelled {cancelled}, errors {errors}; pending {pending}; "
                f"RSS {reading.server_kib / 1024:.0f} + {reading.workers_kib / 1024:.0f} MiB "
                f"({reading.workers} workers)")
            if ok > last_ok:
                last_ok, last_progress = ok, now
            elif args.stop_on_wedge and now - last_progress > args.stop_on_wedge and (pending or 0) > 0:
                result.stopped_early = (f"wedged: no request succeeded for {now - last_progress:.0f} s "
                                        f"with {pending} pending")
                break
        else:
            if load.all_finished() and time.time() < deadline_wall:
                result.stopped_early = "request bound reached"
    except KeyboardInterrupt:
        result.stopped_early = "interrupted"
    finally:
        result.load_s = time.monotonic() - t0
        log(f"stopping the clients (in-flight requests have up to {args.request_timeout:g} s)")
        result.client_problems = load.finish(grace_s=args.request_timeout + 30)
        result.kinds = load.tally().to_dict()


def probe(server: SoakServer, tally: Tally, region_prefix: str, timeout_s: float, rounds: int = 5) -> None:
    """Ordinary requests after the load; they must all succeed. Stops at the first failure (bounded time)."""
    from soak_lib.requests import SyncSlot

    try:
        slot = SyncSlot(server.grpc_url, server.http_url, f"{region_prefix}probe_", 0, timeout_s, random.Random(0))
    except Exception as e:  # noqa: BLE001 (counted)
        tally.kind("probe-setup").record_failure("probe-setup", f"{type(e).__name__}: {e}")
        return
    try:
        for _ in range(rounds):
            for kind in PROBE_KINDS:
                t0 = time.perf_counter()
                try:
                    slot.send(kind)
                    tally.kind(f"probe-{kind}").record_ok(time.perf_counter() - t0)
                except Exception as e:  # noqa: BLE001 (counted)
                    tally.kind(f"probe-{kind}").record_failure(f"probe-{kind}", f"{type(e).__name__}: {e}")
                    return
    finally:
        for error in slot.close():
            tally.kind("probe-shm-unregister").record_failure("probe-shm-unregister", error)


def client_leftovers(region_prefix: str) -> list[str]:
    """Shared-memory files of our clients still in /dev/shm (a killed client could not remove them): removed."""
    found = sorted(e for e in os.listdir("/dev/shm") if e.startswith(region_prefix))
    for entry in found:
        try:
            os.unlink(f"/dev/shm/{entry}")
        except OSError:
            pass
    return found


def run_phase(args: argparse.Namespace, batching: str, minutes: float, max_requests: int) -> SoakResult:
    """One server (with or without dynamic batching) under the load for `minutes`; its result, with the verdict."""
    settings = SoakSettings(
        minutes=minutes, concurrency=args.concurrency, processes=args.processes, aio_slots=args.aio_slots,
        cancel_share=args.cancel_share, request_timeout_s=args.request_timeout, max_requests=max_requests,
        rss_growth_limit_mib=args.rss_growth_limit_mib,
        warmup_s=args.warmup if args.warmup is not None else min(60.0, max(10.0, minutes * 6)),
        instances=args.instances, stop_on_wedge_s=args.stop_on_wedge, kinds=args.kinds, batching=batching)
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    result = SoakResult(settings=settings, started=started)
    region_prefix = f"soak{os.getpid()}_"
    logfile = args.out_dir / f"server-{batching}.log"
    server = SoakServer(args.python, logfile, args.instances, dynamic_batching=batching == "dynamic",
                        exit_timeout_s=10.0)
    log(f"{'dynamic batching' if batching == 'dynamic' else 'no dynamic batching'}: starting the server (log {logfile})")
    server.start(timeout_s=120)
    try:
        result.rss_ready = server.rss(0.0)
        run_load(args, server, result, region_prefix)
        result.pending_end = drain_pending(server, wait_s=15)
        tally = result.tally
        if result.stopped_early != "interrupted":
            probe(server, tally, region_prefix, timeout_s=5.0)
        result.kinds = tally.to_dict()
        result.rss_end = server.rss(result.load_s)
    finally:
        log("stopping the server")
        result.server_exit, result.server_stop_s = server.stop()
        result.server_leftovers = server.leftovers()
        result.client_leftovers = client_leftovers(region_prefix)
        result.log_tracebacks, result.log_errors = server.log_problems()
    result.failures = verdict(result)
    return result


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    # SIGINT explicitly too: started in the background by a non-interactive shell, it arrives ignored.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    if args.chaos:
        return chaos.main(args)
    results: list[SoakResult] = []
    try:
        for batching in args.batching:
            results.append(run_phase(args, batching, args.minutes / len(args.batching),
                                     args.max_requests // len(args.batching)))
            if results[-1].stopped_early == "interrupted":
                break
    except RuntimeError as e:  # a server did not start
        log(str(e))
        return 1
    except KeyboardInterrupt:  # outside the load (which reports an interrupted load); the server was stopped
        log("interrupted")
        return 130
    (args.out_dir / "result.json").write_text(json.dumps(
        {"phases": [to_json_dict(r) for r in results], "passed": not any(r.failures for r in results)}, indent=1))
    text = "\n".join(summary(r) for r in results)
    (args.out_dir / "summary.txt").write_text(text)
    print(text)
    log(f"result.json, summary.txt and the server logs in {args.out_dir}")
    if any(r.stopped_early == "interrupted" for r in results):
        return 130
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
