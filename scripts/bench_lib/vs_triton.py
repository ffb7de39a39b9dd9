"""``scripts/bench --vs-triton``: ours against the real tritonserver 2.51 on one generated model repository (issue 37).

The repository (repo_double.py): ``double_small`` (FP32[16]) and ``double_1mib`` (FP32[262144]), each a Triton
Python-backend ``model.py`` (double_model.py: y = 2x over the request list, ``triton_python_backend_utils``),
``max_batch_size: 64``, ``dynamic_batching { max_queue_delay_microseconds: 100 }``, one CPU instance. Each round
launches each server once on it (the order alternates from round to round) and runs perf_analyzer (``-b 1``, zero
input) over the cases below, one run per case; every figure reported is the median over the rounds. Beside
throughput and p50, each run reads the CPU time of each role of the server's process tree (ours: front-end and
workers; Triton: tritonserver and its Python stubs) and perf_analyzer's own, per inference the server counted: their
sum bounds what the machine could give the case (its CPUs x 10^6 / µs per request).

``--ours-frontends N[,N...]`` (opt-in) adds, for each N, ours served with ``--frontend-processes N`` as a server of
its own in every round ("ours-feN": N whole servers behind the same ports, each with its own instance of each model,
so N instances in all where the others have one): on a machine with many cores, one event loop may be our limit
while tritonserver's front-ends use several threads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import signal
import sys
import time
from typing import Callable, NoReturn

from bench_lib import procfs
from bench_lib.measure import log, run_case
from bench_lib.perf_analyzer import PaOptions
from bench_lib.real_triton import RealTriton
from bench_lib.repo_double import write_repository
from bench_lib.scheduling import SCase, serve_launch
from bench_lib.servers import Server, group_ready
from bench_lib.triton_launch import (
    SERVERS,
    TritonServer,
    base_environment,
    cpu_by_pid,
    cpu_by_role,
    frontends,
    frontends_name,
    ours_server,
)

DELAY_US = 100
MODELS = ["double_small", "double_1mib"]


@dataclasses.dataclass(frozen=True)
class VCase:
    key: str
    label: str
    protocol: str
    model: str
    shm: str
    concurrency: int
    target: float  # ours / Triton throughput the issue asks for

    def scase(self) -> SCase:
        return SCase(self.protocol, self.model, self.shm, self.key)


CASES = (
    VCase("grpc-16-c1", "gRPC, 16 floats, c=1", "grpc", "double_small", "none", 1, 1.5),
    VCase("grpc-16-c8", "gRPC, 16 floats, c=8", "grpc", "double_small", "none", 8, 1.5),
    VCase("grpc-16-c64", "gRPC, 16 floats, c=64", "grpc", "double_small", "none", 64, 1.5),
    VCase("http-16-c8", "HTTP, 16 floats, c=8", "http", "double_small", "none", 8, 1.5),
    VCase("http-16-c64", "HTTP, 16 floats, c=64", "http", "double_small", "none", 64, 1.5),
    VCase("grpc-1mib-c8", "gRPC, 1 MiB, c=8", "grpc", "double_1mib", "none", 8, 2.5),
    VCase("grpc-1mib-shm-c8", "gRPC, 1 MiB, system shm, c=8", "grpc", "double_1mib", "system", 8, 6.0),
)
QUICK = ("grpc-16-c1", "http-16-c8")
P50_CASE, P50_TARGET = "grpc-16-c1", 0.7  # ours' p50 <= 0.7 x Triton's


def select(quick: bool, keys: str | None) -> list[VCase]:
    """The cases to run: all, the quick two, or those named (comma-separated keys).

    Raises:
        ValueError: a key the suite does not have.
    """
    if keys:
        wanted = [k for k in keys.split(",") if k]
        bad = sorted(set(wanted) - {c.key for c in CASES})
        if bad:
            raise ValueError(f"unknown --vs-cases: {bad} (choose from {','.join(c.key for c in CASES)})")
        return [c for c in CASES if c.key in wanted]
    return [c for c in CASES if not quick or c.key in QUICK]


def parse_frontends(text: str) -> list[int]:
    """The --ours-frontends list: numbers of front-end processes (2 or more), in the order typed, each once.

    Raises:
        ValueError: an item that is not such a number.
    """
    out: list[int] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or int(item) < 2:
            raise ValueError(f"--ours-frontends: {item!r} is not a number of front-end processes of 2 or more "
                             "(ours is the single one)")
        if int(item) not in out:
            out.append(int(item))
    if not out:
        raise ValueError("--ours-frontends: no number of front-end processes given")
    return out


def server_names(servers: list[str], ours_frontends: list[int]) -> list[str]:
    """The suite's servers in a round's first order: ours, ours on N front-end processes for each N (when ours is
    measured), then Triton."""
    names = [s for s in SERVERS if s in servers]
    extra = [frontends_name(n) for n in ours_frontends] if "ours" in names else []
    return names[:1] + extra + names[1:] if names[:1] == ["ours"] else names


class VsTriton:
    def __init__(self, args: argparse.Namespace, opts: PaOptions, real: RealTriton | None) -> None:
        self.args, self.opts, self.real = args, opts, real
        self.cases = select(args.quick, args.vs_cases)
        self.servers = server_names(args.servers, getattr(args, "ours_frontends", None) or [])
        self.samples: dict[str, list[dict]] = {}  # "<server>/<case>" -> one dict per round
        self.problems: list[str] = []
        self.env = base_environment()
        self.repository = write_repository(args.out_dir / "repository", MODELS, "dynamic", DELAY_US)
        self.backends = real.stage_backends(args.out_dir / "backends") if real and "triton" in self.servers else None

    def _server(self, name: str, tag: str) -> Server:
        logfile = self.args.out_dir / f"{tag}-server.log"
        models = sorted({c.model for c in self.cases})
        if name == "triton":
            assert self.real is not None and self.backends is not None
            return TritonServer(self.real, self.backends, self.repository, models, logfile, self.args.out_dir,
                                self.env)
        n = frontends(name)
        extra = ("--frontend-processes", str(n)) if n > 1 else ()
        return ours_server(self.args.ours_python, self.repository, models, logfile, self.args.out_dir, self.env,
                           *extra)

    def _case(self, server: Server, name: str, case: VCase, tag: str) -> None:
        before = cpu_by_pid(server.refresh_tree())
        res = run_case(self.opts, server, case.scase(), str(case.concurrency),  # type: ignore[arg-type]
                       self.args.out_dir, f"{tag}-{case.key}", self.problems)
        roles = cpu_by_role(name, before, cpu_by_pid(server.refresh_tree()))
        r = res.get(case.concurrency)
        if r is None:
            return
        n, run = r.run.requests, r.run
        per = {k: (v / n * 1e6 if n else None) for k, v in roles.items()}
        s = {"throughput": r.throughput, "p50_us": r.p50_us, "p99_us": r.p99_us, "requests": n,
             "wall_s": run.wall_s, "cpu_us": per, "pa_cpu_us": run.pa_cpu_s / n * 1e6 if n else None,
             "server_cores": run.server_cpu_s / run.wall_s, "pa_cores": run.pa_cpu_s / run.wall_s,
             "other_cores": run.other_cpu_s / run.wall_s, "load": run.load_end}
        self.samples.setdefault(f"{name}/{case.key}", []).append(s)
        cpu = " + ".join(f"{k} {v:.0f}" for k, v in per.items() if v is not None)
        log(f"    {name:<8} {case.key:<17} {r.throughput:9.1f}/s  p50 {r.p50_us / 1000:7.3f} ms  CPU us/req {cpu}"
            f" + perf_analyzer {s['pa_cpu_us'] or 0:.0f}  (other load {s['other_cores']:.2f} cores)")

    def launch(self, rnd: int, name: str) -> None:
        tag = f"v{rnd + 1}-{name}"
        server = self._server(name, tag)

        def body(s: Server) -> None:
            n = frontends(name)
            if n > 1:  # (every front-end process ready and in the tree whose CPU is read)
                problem = group_ready(s, n, self.args.startup_timeout)
                if problem:
                    self.problems.append(f"{tag}: {problem}")
                    return
                log(f"{tag}: {n} front-end processes ready")
            for case in self.cases:
                self._case(s, name, case, tag)
        serve_launch(server, self.args, tag, body, self.problems)

    def run(self) -> dict:
        t0, load_start, uptime_start = time.time(), procfs.loadavg(), uptime()
        plan = [(rnd, name) for rnd in range(self.args.repeats)
                for name in (self.servers if rnd % 2 == 0 else list(reversed(self.servers)))]
        limit = getattr(self.args, "time_limit", None)
        for done, (rnd, name) in enumerate(plan):
            elapsed = time.time() - t0
            if limit and done and elapsed + elapsed / done > limit:  # (the next launch, as long as the mean one)
                self.problems.append(f"--time-limit {limit:g} s: {done} of {len(plan)} launches run "
                                     f"({elapsed:.0f} s), the rest left out")
                break
            self.launch(rnd, name)
        return {"suite": "vs-triton", "samples": self.samples, "problems": self.problems,
                "cases": [dataclasses.asdict(c) for c in self.cases], "servers": self.servers,
                "elapsed_s": time.time() - t0, "load_start": load_start, "load_end": procfs.loadavg(),
                "uptime_start": uptime_start, "uptime_end": uptime(),
                "machine": dataclasses.asdict(procfs.machine_info()), "repeats": self.args.repeats,
                "interval_ms": self.args.interval, "delay_us": DELAY_US}


def uptime() -> str:
    """`uptime`'s load averages, as the report quotes them."""
    return " ".join((procfs.PROC / "loadavg").read_text().split()[:3])


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt


def measure(args: argparse.Namespace, run: Callable[[], dict], meta: dict[str, str]) -> dict | None:
    """`run()` (one suite's measurements) with SIGINT/SIGTERM turned into a clean stop; its result dated, given `meta`
    (commit, versions) and saved to out_dir/results.json; None when interrupted."""
    log(f"output folder: {args.out_dir}")
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run()
    except KeyboardInterrupt:
        log("interrupted")
        return None
    result["date"] = args.started.strftime("%Y-%m-%d %H:%M UTC")
    result.update(meta)
    (args.out_dir / "results.json").write_text(json.dumps(result, indent=1))
    return result


def run_vs_triton(args: argparse.Namespace, opts: PaOptions, real: RealTriton | None, meta: dict[str, str]) -> int:
    """`--vs-triton`: measure (or read --from-results), print the summary, write its part of the report."""
    from bench_lib import triton_report

    if args.from_results:
        result = json.loads(args.from_results.read_text())
    else:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        found = measure(args, VsTriton(args, opts, real).run, meta)
        if found is None:
            return 130
        result = found
    print(triton_report.vs_summary(result), file=sys.stdout)
    if not args.no_doc:
        triton_report.write_section(args.triton_doc, "vs-triton", triton_report.vs_markdown(result))
        log(f"wrote {args.triton_doc}")
    return 1 if result["problems"] else 0


def ensure_real(args: argparse.Namespace, needed: bool) -> tuple[RealTriton | None, str | None]:
    """The real tritonserver of the venv of --nvidia-python, and why it cannot run (None when it can)."""
    if not needed:
        return None, None
    real = RealTriton.of_python(pathlib.Path(args.nvidia_python))
    return real, real.missing()
