"""`scripts/soak --chaos`: mixed, value-checked load against a server of a small model repository (a plain model,
an ensemble, a BLS model) while faults are injected (soak_lib.chaos_faults); fails on one wrong answer, one hang,
one error no fault explains, or a leak at the end. docs/soak.md, "Chaos under load".

Phases, each with a server of its own: `explicit` (one server, model control explicit, so that models can be loaded
again under load) and, with --frontend-processes N (N > 1), `group` (N front-end processes, model control none as
the group requires; at two thirds of the phase a front-end process is SIGKILLed and the group must stop, naming it,
leaving nothing behind).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

import tritonclient.grpc as grpcclient
from bench_lib import procfs

from soak_lib.chaos_clients import ChaosClientSpec, run_chaos_clients
from soak_lib.chaos_faults import FAULT_KINDS, FaultInjector, FaultPlan
from soak_lib.chaos_repo import INSTANCES, write_repository
from soak_lib.chaos_requests import CHAOS_KINDS, ChaosSlot
from soak_lib.chaos_result import ChaosResult, ChaosSettings, summary, to_json_dict, verdict
from soak_lib.load import Load, drain_pending
from soak_lib.requests import GRPC_CHANNEL_ARGS
from soak_lib.server import REPO, SoakServer, fd_count
from soak_lib.tally import Tally

PROBE_KINDS = [f"{p}-{m}{s}" for m in ("double", "pipeline", "bls") for p in ("grpc", "http") for s in ("", "-shm")]
EXIT_TIMEOUT_S = 10.0


def log(msg: str) -> None:
    print(f"[soak chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+changes" if dirty else "")


def plan_clients(args: argparse.Namespace, server: SoakServer, deadline: float, max_requests: int,
                 region_prefix: str, frontend_gone: Any) -> list[ChaosClientSpec]:
    specs = []
    for i in range(args.processes):
        share = args.concurrency // args.processes + (1 if i < args.concurrency % args.processes else 0)
        specs.append(ChaosClientSpec(
            index=i, grpc_url=server.grpc_url, http_url=server.http_url, slots=share, kinds=list(CHAOS_KINDS),
            timeout_s=args.client_timeout, deadline=deadline,
            max_requests=max_requests // args.processes + (1 if i < max_requests % args.processes else 0),
            region_prefix=f"{region_prefix}{i}_", seed=args.seed * 100 + i, frontend_gone=frontend_gone))
    return specs


def _frontend_index(logfile: pathlib.Path, pid: int) -> tuple[int | None, bool]:
    """The killed front-end process's index (from the group's log) and whether the log names its exit."""
    text = logfile.read_text(errors="replace")
    m = re.search(rf"front-end process (\d+) started \(pid {pid}\)", text)
    index = int(m.group(1)) if m else None
    return index, index is not None and f"front-end process {index} (pid {pid}) exited" in text


def run_load(args: argparse.Namespace, server: SoakServer, result: ChaosResult, region_prefix: str,
             hold_dir: pathlib.Path) -> None:
    """Clients and faults until the phase's minutes are up (the faults end a little earlier, so that no region is
    re-registered while its client closes), the request bound, a wedge, or (group) the group's exit."""
    s = result.settings
    t0 = time.monotonic()
    deadline_wall = time.time() + s.minutes * 60
    group = s.phase == "group"
    frontend_gone = mp.get_context("spawn").Event()
    # (group: the phase ends with the group's exit after the kill; the clients' own deadline is only a bound)
    specs = plan_clients(args, server, deadline_wall + (60 if group else 0), s.max_requests, region_prefix,
                         frontend_gone)
    plan = FaultPlan(kinds=s.fault_kinds, interval_s=s.fault_interval_s, timeout_s=s.client_timeout_s,
                     exec_timeout_s=s.execution_timeout_s, hold_dir=hold_dir,
                     regions=[n for spec in specs for n in spec.region_names()])
    injector = FaultInjector(server, plan, seed=args.seed, before_frontend_kill=frontend_gone.set)
    faults_end = t0 + max(s.minutes * 60 - max(3.0, s.minutes * 60 * 0.05), s.minutes * 60 * 0.5)
    load = Load(specs, target=run_chaos_clients)
    load.start()
    log(f"phase {s.phase}: {s.concurrency} calls in flight from {s.processes} processes for up to {s.minutes:g} min")
    last_ok, last_progress = 0, time.monotonic()
    dead_before: set[str] = set()
    try:
        while len(load.latest) < len(specs) and time.monotonic() - t0 < 120 and not load.all_finished():
            load.drain(wait_s=0.5)  # the faults begin once every client process has reported
        if group:  # at two thirds of the phase, and once the clients run
            plan.frontend_kill_at = max(t0 + s.minutes * 60 * 2 / 3, time.monotonic() + 1.0)
        injector.start()
        while not load.all_finished() and (time.time() < deadline_wall or (
                group and injector.is_alive() and time.time() < deadline_wall + 30)):
            next_sample = time.monotonic() + args.sample_every
            while time.monotonic() < next_sample and not load.all_finished() and not injector.frontend_killed.is_set():
                load.drain(wait_s=min(0.2, next_sample - time.monotonic()))
                if time.monotonic() >= faults_end and not group:  # (group: the injector ends with its kill)
                    injector.stop()
            if injector.frontend_killed.is_set():
                _await_group_exit(server, injector, result, t0)
                break
            now = time.monotonic()
            reading = server.rss(now - t0)
            result.client_threads_max = max(result.client_threads_max, max(map(_threads, load.procs), default=0))
            dead = set(server.dead_owner_segments())  # (a segment seen at two samples in a row was not removed)
            result.dead_owner_segments = sorted(set(result.dead_owner_segments) | (dead & dead_before))
            dead_before = dead
            pending = server.pending()
            if reading is None:
                result.stopped_early = "the server process exited during the load"
                break
            result.rss.append(reading)
            if pending is not None:
                result.pending_max = max(result.pending_max or 0, pending)
            ok, cancelled, errors = load.tally().totals()
            log(f"  {now - t0:5.0f} s: ok {ok}, deadline {cancelled}, errors {errors}; faults "
                f"{injector.log.injected()}; pending {pending}; RSS {reading.server_kib / 1024:.0f} + "
                f"{reading.workers_kib / 1024:.0f} MiB ({reading.workers} workers); client threads "
                f"{result.client_threads_max}")
            if ok > last_ok:
                last_ok, last_progress = ok, now
            elif args.stop_on_wedge and now - last_progress > args.stop_on_wedge:
                result.stopped_early = f"wedged: no request succeeded for {now - last_progress:.0f} s ({pending} pending)"
                break
    except KeyboardInterrupt:
        result.stopped_early = "interrupted"
    except Exception as e:  # noqa: BLE001 (a defect of the soak itself: reported, the server still stopped)
        result.stopped_early = f"the soak itself failed: {type(e).__name__}: {e}"
        log(traceback.format_exc())
    finally:
        injector.stop()
        injector.join(s.client_timeout_s + 15)
        if injector.is_alive():
            result.client_problems.append("the fault injector did not end in time")
        result.load_s = time.monotonic() - t0
        log(f"stopping the clients (calls in flight have up to {s.client_timeout_s:g} s)")
        result.client_problems += load.finish(grace_s=s.client_timeout_s + 30)
        result.kinds = load.tally().to_dict()
        result.faults = injector.log.to_dict()


def _threads(proc: Any) -> int:
    """Threads of a client process now (0 once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{proc.pid}/task"))
    except (OSError, TypeError):
        return 0


def _await_group_exit(server: SoakServer, injector: FaultInjector, result: ChaosResult, t0: float) -> None:
    """After the front-end kill: the group must exit by itself (within its exit timeout and a margin)."""
    kill = injector.frontend_kill
    assert server.proc is not None
    try:
        server.proc.wait(EXIT_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        pass
    exited = server.proc.poll()
    result.frontend_kill = {"pid": kill["pid"], "t_s": kill["at"] - t0,
                            "exit_after_s": time.monotonic() - kill["at"] if exited is not None else None}
    log(f"front-end process pid {kill['pid']} killed; the group " +
        (f"exited with status {exited} after {result.frontend_kill['exit_after_s']:.1f} s" if exited is not None
         else f"did not exit within {EXIT_TIMEOUT_S + 30:g} s"))


def wait_workers(server: SoakServer, expected: dict[str, int], wait_s: float) -> dict[str, int]:
    """Workers per model once they are as expected (killed ones restarted, reloaded pools gone), or after wait_s."""
    deadline = time.monotonic() + wait_s
    while True:
        counts: dict[str, int] = {}
        for p in server.tree():
            if p.role == "worker":
                counts[p.model] = counts.get(p.model, 0) + 1
        if counts == expected or time.monotonic() >= deadline:
            return dict(sorted(counts.items()))
        time.sleep(0.5)


def probe(server: SoakServer, tally: Tally, region_prefix: str, timeout_s: float, rounds: int = 3) -> None:
    """Value-checked calls of every model after the faults; each must succeed (stops at the first failure)."""
    try:
        slot = ChaosSlot(server.grpc_url, server.http_url, f"{region_prefix}probe_", 0, timeout_s, random.Random(0))
    except Exception as e:  # noqa: BLE001 (counted)
        tally.kind("probe-setup").record_failure("probe-setup", f"{type(e).__name__}: {e}")
        return
    try:
        for _ in range(rounds):
            for kind in PROBE_KINDS:
                for outcome in slot.send_checked(kind):
                    name = f"probe-{outcome.kind}"
                    if isinstance(outcome.result, BaseException):
                        tally.kind(name).record_failure(name, f"{type(outcome.result).__name__}: {outcome.result}")
                        return
                    tally.kind(name).record_ok(outcome.seconds)
    finally:
        for error in slot.close():
            tally.kind("probe-shm-unregister").record_failure("probe-shm-unregister", error)


def registrations(server: SoakServer, timeout_s: float) -> list[str]:
    """The system shared-memory regions the server still has registered."""
    client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=GRPC_CHANNEL_ARGS)
    try:
        status = client.get_system_shared_memory_status(as_json=True, client_timeout=timeout_s)
        return sorted(status.get("regions", {}))
    except Exception as e:  # noqa: BLE001 (reported as what it is)
        return [f"(status unreadable: {e})"]
    finally:
        client.close()


def mapped_client_regions(server: SoakServer, region_prefix: str) -> list[str]:
    """Client region files (ours: the prefix) that a process of the server still maps or holds open."""
    pids = [p.pid for p in server.tree()]
    return sorted(f for f in procfs.shm_files(pids) if f.startswith(f"/dev/shm/{region_prefix}"))


def client_leftovers(region_prefix: str) -> list[str]:
    """Shared-memory files of our clients still in /dev/shm (a killed client could not remove them): removed."""
    found = sorted(e for e in os.listdir("/dev/shm") if e.startswith(region_prefix))
    for entry in found:
        try:
            os.unlink(f"/dev/shm/{entry}")
        except OSError:
            pass
    return found


def _started(server: SoakServer, result: ChaosResult) -> bool:
    try:
        server.start(timeout_s=180)
        return True
    except RuntimeError as e:  # it did not start (and was stopped)
        result.stopped_early = str(e).splitlines()[0]
        log(str(e))
        return False


def _serve_and_check(args: argparse.Namespace, server: SoakServer, result: ChaosResult, region_prefix: str,
                     hold_dir: pathlib.Path) -> None:
    """The load with its faults, then (one server) the checks that need the server still running."""
    result.rss_ready = server.rss(0.0)
    result.fds_ready = fd_count(server.pid) if server.pid else None
    run_load(args, server, result, region_prefix, hold_dir)
    if result.settings.phase == "group" or result.stopped_early == "interrupted":
        return
    log("after the load: drain, workers, probes, registrations, mappings, fds")
    result.pending_end = drain_pending(server, wait_s=15)
    result.workers_expected = dict(sorted(INSTANCES.items()))
    result.workers_end = wait_workers(server, result.workers_expected, wait_s=30)
    tally = result.tally
    probe(server, tally, region_prefix, timeout_s=result.settings.client_timeout_s)
    result.kinds = tally.to_dict()
    result.registrations_left = registrations(server, result.settings.client_timeout_s)
    result.mapped_regions_left = mapped_client_regions(server, region_prefix)
    result.dead_owner_segments = sorted(set(result.dead_owner_segments) | set(server.dead_owner_segments()))
    result.fds_end = fd_count(server.pid) if server.pid else None
    result.rss_end = server.rss(result.load_s)


def run_phase(args: argparse.Namespace, phase: str, minutes: float, max_requests: int) -> ChaosResult:
    group = phase == "group"
    kinds = [k for k in args.faults if not (group and k == "reload")]
    settings = ChaosSettings(
        phase=phase, minutes=minutes, concurrency=args.concurrency, processes=args.processes,
        frontend_processes=args.frontend_processes if group else 1, execution_timeout_s=args.execution_timeout,
        client_timeout_s=args.client_timeout, fault_interval_s=args.fault_interval, fault_kinds=kinds,
        rss_growth_limit_mib=args.rss_growth_limit_mib, fd_growth_limit=args.fd_growth_limit,
        warmup_s=args.warmup if args.warmup is not None else min(60.0, max(5.0, minutes * 6)),
        max_requests=max_requests)
    result = ChaosResult(settings=settings, started=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                         commit=commit())
    work = pathlib.Path(tempfile.mkdtemp(prefix="soak-chaos-"))
    hold_dir = work / "holds"
    hold_dir.mkdir()
    repo = write_repository(work / "repo", hold_dir)
    model_args = ["--model-repository", str(repo), "--execution-timeout", f"{args.execution_timeout:g}"]
    model_args += (["--frontend-processes", str(args.frontend_processes)] if group
                   else ["--model-control-mode", "explicit", "--load-model", "*"])
    region_prefix = f"chaos{os.getpid()}{phase[0]}_"
    logfile = args.out_dir / f"server-chaos-{phase}.log"
    server = SoakServer(args.python, logfile, 0, False, exit_timeout_s=EXIT_TIMEOUT_S, model_args=model_args)
    log(f"phase {phase}: starting the server (log {logfile})")
    try:
        if _started(server, result):
            _serve_and_check(args, server, result, region_prefix, hold_dir)
    finally:
        log("stopping the server")
        exit_status, stop_s = server.stop()
        result.server_exit = exit_status
        if group and result.frontend_kill.get("pid"):
            index, logged = _frontend_index(logfile, result.frontend_kill["pid"])
            result.frontend_kill.update(index=index, logged=logged)
            result.server_stop_s = result.frontend_kill.get("exit_after_s") or stop_s
        else:
            result.server_stop_s = stop_s
        result.server_leftovers = server.leftovers()
        result.client_leftovers = client_leftovers(region_prefix)
        result.hold_leftovers = sorted(p.name for p in hold_dir.iterdir())
        result.log_tracebacks, result.log_errors = server.log_problems()
        shutil.rmtree(work, ignore_errors=True)
    result.failures = verdict(result)
    return result


def main(args: argparse.Namespace) -> int:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    share = {"explicit": 3 / 4, "group": 1 / 4} if len(args.chaos_phases) == 2 else {args.chaos_phases[0]: 1.0}
    phases = [(phase, args.minutes * share[phase]) for phase in args.chaos_phases]
    results: list[ChaosResult] = []
    try:
        for phase, minutes in phases:
            results.append(run_phase(args, phase, minutes, args.max_requests // len(phases)))
            if results[-1].stopped_early == "interrupted":
                break
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    (args.out_dir / "result.json").write_text(json.dumps(
        {"chaos": True, "phases": [to_json_dict(r) for r in results],
         "passed": not any(r.failures for r in results)}, indent=1))
    text = "\n".join(summary(r) for r in results)
    (args.out_dir / "summary.txt").write_text(text)
    print(text)
    log(f"result.json, summary.txt and the server logs in {args.out_dir}")
    if any(r.stopped_early == "interrupted" for r in results):
        return 130
    return 1 if any(r.failures for r in results) else 0


__all__ = ["FAULT_KINDS", "main"]
