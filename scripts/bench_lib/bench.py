"""pytriton vs NVIDIA PyTriton: perf_analyzer matrix, start-up to ready, resident memory.

Run through ``scripts/bench`` (which installs perf_analyzer, NVIDIA PyTriton and matplotlib first);
``scripts/bench --help`` lists the options. Only the standard library (and matplotlib for the plot).

One "launch" = start one server with ``serve_double.py`` (same file, same callable, under each server's
own venv), time it to ready, read its memory, run perf_analyzer over the cases, stop it and check that it
left nothing behind. Launches alternate between the two servers (A B, B A, A B, ...) so that a slow drift
in the machine's load hits both alike; every figure reported is the median over the repeats.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from typing import NoReturn

if __package__ in (None, ""):  # run as a file (scripts/bench): import `bench_lib` as a package from scripts/
    _HERE = pathlib.Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from bench_lib import procfs
from bench_lib.cases import BATCHED_MODELS, MAIN_MODELS, SERVER_LABEL, Case, models_of, select_cases
from bench_lib.measure import log, run_case
from bench_lib.perf_analyzer import PaOptions
from bench_lib.plot import plot
from bench_lib.report import summary, write_report
from bench_lib.results import (
    BenchResult,
    CaseRun,
    InprocessRow,
    Meta,
    ServerAggregate,
    ServerSamples,
    Settings,
    aggregate,
    from_dict,
    load_results,
    median,
    save_results,
)
from bench_lib.servers import REPO, Server, ServerSpec


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, with defaults filled in (repeats by --quick, servers as a list, out_dir resolved)."""
    p = argparse.ArgumentParser(prog="scripts/bench", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 repeat, 4 cases, no batching launch (~2-3 min)")
    p.add_argument("--suite", choices=("main", "scheduling", "wire"), default="main",
                   help="main: the matrix above; scheduling: issue 18's rows, each against its target "
                        "(bench_lib/scheduling.py; writes docs/benchmarks-scheduling.md; 1 repeat unless --repeats); "
                        "wire: issue 21's rows (bench_lib/wire.py; docs/benchmarks-wire.md; 1 repeat unless --repeats)")
    p.add_argument("--sched-rows", default="batching,cpu,sequence,cache",
                   help="scheduling suite: comma-separated subset of batching,cpu,sequence,cache")
    p.add_argument("--wire-rows", default="large,conn,multife",
                   help="wire suite: comma-separated subset of large,conn,connfe,multife")
    p.add_argument("--wire-frontends", default="2",
                   help="wire suite, connfe row: ours with `pytriton serve --frontend-processes N`, for each N of "
                        "this comma-separated list (default 2), beside NVIDIA's conn figures")
    p.add_argument("--cache-requests", type=int, default=500,
                   help="scheduling suite: response-cache hits (and as many misses) per repeat (500)")
    p.add_argument("--vs-triton", action="store_true",
                   help="ours against the real tritonserver 2.51 (the nvidia-pytriton wheel's, venv of --nvidia-python)"
                        " on one generated Python-backend repository, issue 37's cases (bench_lib/vs_triton.py); "
                        "3 rounds unless --repeats, --quick: 2 cases, 1 round, 500 ms windows; writes its section of "
                        "docs/benchmarks-triton.md")
    p.add_argument("--vs-cases", help="--vs-triton: comma-separated subset of grpc-16-c1,grpc-16-c8,grpc-16-c64,"
                                      "http-16-c8,http-16-c64,grpc-1mib-c8,grpc-1mib-shm-c8")
    p.add_argument("--ours-frontends", metavar="N[,N...]",
                   help="--vs-triton: also serve ours with `--frontend-processes N` (N whole servers behind the same "
                        "ports, each with its own model instances), for each N (2 or more), as a server of its own in "
                        "every round, reported beside Triton (default: none)")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="--vs-triton: start no launch that would end past S seconds from the start (judged by the "
                        "mean launch so far); the launches left out are listed as a problem (default: no limit)")
    p.add_argument("--many-models", metavar="N[,N...]",
                   help="ready time and PSS of the process tree with N copies of a small Python-backend model, ours "
                        "beside the real tritonserver 2.51 (bench_lib/many_models.py), for each N; 3 rounds unless "
                        "--repeats (1 with --quick); writes its section of docs/benchmarks-triton.md")
    p.add_argument("--triton-doc", type=pathlib.Path, default=REPO / "docs" / "benchmarks-triton.md",
                   help="the report of --vs-triton and --many-models (default docs/benchmarks-triton.md)")
    p.add_argument("--tls", action="store_true",
                   help="our server's gRPC with and without TLS, side by side (bench_lib/tls_bench.py); no doc")
    p.add_argument("--repeats", type=int, help="launches per server (default 3; 1 with --quick)")
    p.add_argument("--cases", help="comma-separated case keys, e.g. grpc-small-none,http-1mib-system "
                   "(grpc|http)-(small|1mib|16mib)-(none|system)[-batched] (16mib only when named)")
    p.add_argument("--servers",
                   help="comma-separated subset of ours,nvidia,repo (default all; repo: ours, the same model from a "
                        "model repository, served by `pytriton serve --model-repository`); with --vs-triton and "
                        "--many-models a subset of ours,triton (default both; ours alone needs no NVIDIA venv)")
    p.add_argument("--no-batching", action="store_true", help="skip the dynamic-batching launches")
    p.add_argument("--no-inprocess", action="store_true", help="skip the in-process rows (bench_lib/inprocess.py)")
    p.add_argument("--inprocess-only", action="store_true",
                   help="measure only the in-process rows (no perf_analyzer, no NVIDIA PyTriton, no markdown)")
    p.add_argument("--inprocess-duration", type=float,
                   help="timed seconds per in-process row (default 3; 1 with --quick)")
    p.add_argument("--concurrency", default="1:8:7", help="perf_analyzer --concurrency-range (default 1:8:7)")
    p.add_argument("--batched-concurrency", default="8", help="concurrency for the batching cases (default 8)")
    p.add_argument("--interval", type=int,
                   help="perf_analyzer --measurement-interval ms (1500; 500 with --quick --vs-triton)")
    p.add_argument("--max-trials", type=int, default=6, help="perf_analyzer --max-trials (6)")
    p.add_argument("--stability", type=int, default=50, help="perf_analyzer --stability-percentage (50)")
    p.add_argument("--pa-timeout", type=int, default=120, help="kill one perf_analyzer run after this many s")
    p.add_argument("--startup-timeout", type=float, default=120.0)
    p.add_argument("--settle", type=float, default=1.0, help="seconds between ready and the memory reading")
    p.add_argument("--out-dir", type=pathlib.Path, help="logs/CSVs/results.json (default .bench/results/<UTC time>)")
    p.add_argument("--doc", type=pathlib.Path, default=REPO / "docs" / "benchmarks.md")
    p.add_argument("--plot", type=pathlib.Path, default=REPO / "docs" / "benchmarks.png")
    p.add_argument("--no-doc", action="store_true", help="write neither the markdown nor the plot")
    p.add_argument("--from-results", type=pathlib.Path, metavar="RESULTS_JSON",
                   help="measure nothing: rewrite the markdown and the plot from an earlier run's results.json")
    p.add_argument("--ours-python", type=pathlib.Path, default=REPO / ".venv" / "bin" / "python")
    p.add_argument("--nvidia-python", type=pathlib.Path, default=REPO / ".bench" / "nvidia-pytriton" / "bin" / "python",
                   help="python of the venv holding nvidia-pytriton 0.7.0 (NVIDIA PyTriton; its tritonserver 2.51 for "
                        "--vs-triton and --many-models)")
    p.add_argument("--perf-analyzer", type=pathlib.Path, default=REPO / ".tools" / "bin" / "perf_analyzer")
    args = p.parse_args(argv)
    triton_suite = args.vs_triton or args.many_models is not None
    if args.vs_triton and args.many_models is not None:
        p.error("--vs-triton and --many-models are separate runs: give one of them")
    if args.repeats is None:
        args.repeats = 1 if args.quick or args.suite in ("scheduling", "wire") else 3
    if args.interval is None:
        args.interval = 500 if args.quick and triton_suite else 1500
    if args.many_models is not None:
        from bench_lib.many_models import parse_counts
        try:
            args.many_models = parse_counts(args.many_models)
        except ValueError as e:
            p.error(str(e))
    if args.time_limit is not None and not args.vs_triton:
        p.error("--time-limit goes with --vs-triton")
    if args.ours_frontends is not None:
        from bench_lib.vs_triton import parse_frontends
        if not args.vs_triton:
            p.error("--ours-frontends goes with --vs-triton")
        try:
            args.ours_frontends = parse_frontends(args.ours_frontends)
        except ValueError as e:
            p.error(str(e))
    if args.vs_cases:
        from bench_lib.vs_triton import select
        try:
            select(False, args.vs_cases)
        except ValueError as e:
            p.error(str(e))
    args.sched_rows = [r for r in args.sched_rows.split(",") if r]
    if args.suite == "scheduling":
        from bench_lib.scheduling import ROWS
        bad = set(args.sched_rows) - set(ROWS)
        if bad:
            p.error(f"unknown --sched-rows: {sorted(bad)} (choose from {','.join(ROWS)})")
        if args.doc == REPO / "docs" / "benchmarks.md":
            args.doc = REPO / "docs" / "benchmarks-scheduling.md"
    if args.suite == "wire":
        from bench_lib.wire import parse_frontends, parse_rows
        try:
            args.wire_rows = parse_rows(args.wire_rows)
            args.wire_frontends = parse_frontends(args.wire_frontends)
        except ValueError as e:
            p.error(str(e))
        if args.doc == REPO / "docs" / "benchmarks.md":
            args.doc = REPO / "docs" / "benchmarks-wire.md"
    if args.inprocess_duration is None:
        args.inprocess_duration = 1.0 if args.quick else 3.0
    if args.inprocess_only:
        if args.no_inprocess:
            p.error("--inprocess-only and --no-inprocess exclude each other")
        args.repeats, args.no_doc = 0, True
    if args.servers is None:
        args.servers = "ours,triton" if triton_suite else "ours,nvidia,repo"
    args.servers = [s for s in args.servers.split(",") if s]
    unknown = set(args.servers) - ({"ours", "triton"} if triton_suite else set(SERVER_LABEL))
    if unknown:
        p.error(f"unknown server(s): {sorted(unknown)}")
    args.started = dt.datetime.now(dt.timezone.utc)
    if args.out_dir is None:
        args.out_dir = REPO / ".bench" / "results" / args.started.strftime("%Y%m%dT%H%M%SZ")
    args.out_dir = args.out_dir.resolve()
    try:
        args.cases_main, args.cases_batched = select_cases(args.quick, args.no_batching, args.cases)
    except ValueError as e:
        p.error(str(e))
    return args


def pa_options(args: argparse.Namespace) -> PaOptions:
    return PaOptions(binary=args.perf_analyzer, interval_ms=args.interval, max_trials=args.max_trials,
                     stability=args.stability, timeout_s=args.pa_timeout)


def server_specs(args: argparse.Namespace) -> dict[str, ServerSpec]:
    """How to start each server: its venv's python and its environment (NVIDIA's needs its libpython)."""
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GLIBC_TUNABLES", "LD_PRELOAD")}
    libdir = ""
    if "nvidia" in args.servers and not getattr(args, "inprocess_only", False):  # (its venv need not exist otherwise)
        try:
            libdir = subprocess.run([str(args.nvidia_python), "-c",
                                     "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
                                    capture_output=True, text=True, check=False).stdout.strip()
        except OSError:  # no NVIDIA venv
            libdir = ""
    nv_env = dict(base_env)
    nv_env["LD_LIBRARY_PATH"] = libdir + (":" + base_env["LD_LIBRARY_PATH"] if base_env.get("LD_LIBRARY_PATH") else "")
    return {"ours": ServerSpec("ours", args.ours_python, base_env),
            "nvidia": ServerSpec("nvidia", args.nvidia_python, nv_env),
            "repo": ServerSpec("repo", args.ours_python, base_env)}


def _log_results(case: Case, res: dict[int, CaseRun]) -> None:
    for c in sorted(res):
        r = res[c]
        cpu = r.run.server_cpu_us_per_request
        log(f"    {case.key:<22} c={c:<2} {r.throughput:9.1f}/s  p50 {r.p50_us / 1000:7.2f} ms  "
            f"p99 {r.p99_us / 1000:7.2f} ms" + (f"  server CPU {cpu:6.0f} us/req" if cpu else "")
            + f"  (other load {r.run.other_cpu_s / max(r.run.wall_s, 1e-9):.2f} cores, "
            f"stolen {(r.run.steal_s or 0.0) / max(r.run.wall_s, 1e-9):.2f})")


class Bench:
    """The measuring loop: repeats x servers x (main launch, batching launch), results into `samples`."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.opts = pa_options(args)
        self.specs = server_specs(args)
        self.samples = {s: ServerSamples() for s in ("ours", "nvidia", "repo") if s in args.servers}
        self.versions: dict[str, str] = {}
        self.problems: list[str] = []
        self.current: list[Server] = []  # running now: stopped on an interrupt

    def _launch(self, name: str, batching: str, models: list[str], tag: str) -> Server | None:
        server = Server(self.specs[name], batching, models, self.args.out_dir / f"{tag}-server.log",
                        self.args.out_dir)
        self.current.append(server)
        if server.start(self.args.startup_timeout):
            time.sleep(self.args.settle)
            return server
        self._stop(server)
        return None

    def _stop(self, server: Server) -> None:
        server.stop()
        self.current.remove(server)
        self.problems.extend(server.problems)
        self.problems.extend(server.scan_log())

    def _measure(self, server: Server, cases: list[Case], concurrency: str, tag: str, rep: int) -> int:
        """perf_analyzer over the cases; the highest peak RSS of the runs (KiB)."""
        peak = 0
        for case in cases:
            res = run_case(self.opts, server, case, concurrency, self.args.out_dir, f"{tag}-{case.key}", self.problems)
            for c, r in res.items():
                r.repeat = rep + 1
                self.samples[server.spec.name].add(case.key, c, r)
                peak = max(peak, r.run.peak_rss_kib)
            _log_results(case, res)
        return peak

    def repeat(self, rep: int, name: str) -> None:
        args = self.args
        # ---- main launch: both models, no dynamic batching
        tag = f"r{rep + 1}-{name}"
        log(f"repeat {rep + 1}/{args.repeats}: {SERVER_LABEL[name]}: starting")
        server = self._launch(name, "off", models_of(args.cases_main, MAIN_MODELS), tag)
        if server is None:
            return
        rss, pss = procfs.memory_kib(server.refresh_tree())
        smp = self.samples[name]
        assert server.startup_s is not None  # set by a successful start
        smp.startup_s.append(server.startup_s)
        smp.rss_ready_kib.append(rss)
        smp.pss_ready_kib.append(pss)
        smp.processes = len(server.alive_tree())
        self.versions.setdefault(name, server.server_version())
        log(f"  ready after {server.startup_s:.2f} s; {smp.processes} processes, "
            f"RSS {rss / 1024:.0f} MiB, PSS {pss / 1024:.0f} MiB")
        smp.peak_rss_kib.append(self._measure(server, args.cases_main, args.concurrency, tag, rep))
        self._stop(server)
        # ---- batching launch: one model, PyTriton's default DynamicBatcher (delay 0)
        if args.cases_batched:
            tag = f"r{rep + 1}-{name}-batched"
            log(f"repeat {rep + 1}/{args.repeats}: {SERVER_LABEL[name]} with dynamic batching: starting")
            server = self._launch(name, "dynamic", models_of(args.cases_batched, BATCHED_MODELS), tag)
            if server is not None:
                self._measure(server, args.cases_batched, args.batched_concurrency, tag, rep)
                self._stop(server)

    def run(self) -> BenchResult:
        args = self.args
        t_start = time.time()
        servers = list(self.samples)

        def on_signal(signum: int, _frame: object) -> NoReturn:
            raise KeyboardInterrupt

        # SIGINT explicitly too: started in the background by a non-interactive shell, it arrives ignored.
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        try:
            for rep in range(args.repeats):
                for name in servers if rep % 2 == 0 else list(reversed(servers)):
                    self.repeat(rep, name)
        except KeyboardInterrupt:
            log("interrupted: stopping the server")
            for server in list(self.current):
                server.stop()
                for p in server.problems:
                    log(f"  {p}")
            raise
        inprocess = [] if args.no_inprocess or "ours" not in args.servers else self.inprocess()
        cases = args.cases_main + args.cases_batched
        return BenchResult(
            samples=self.samples, versions=self.versions, problems=self.problems, cases=[c.key for c in cases],
            case_labels={c.key: c.label for c in cases}, elapsed_s=time.time() - t_start,
            settings=Settings(repeats=args.repeats, quick=args.quick, concurrency=args.concurrency,
                              batched_concurrency=args.batched_concurrency, interval_ms=args.interval,
                              max_trials=args.max_trials, stability=args.stability),
            inprocess=inprocess,
        )

    def inprocess(self) -> list[InprocessRow]:
        """The in-process rows: bench_lib/inprocess.py under our venv (its own process, so that our server's
        threads and workers come and go with it), its JSON read back."""
        args = self.args
        out = args.out_dir / "inprocess.json"
        cmd = [str(args.ours_python), str(pathlib.Path(__file__).with_name("inprocess.py")),
               "--duration", str(args.inprocess_duration), "--json", str(out)]
        log(f"in-process rows ({args.inprocess_duration:g} s each): {' '.join(cmd[1:])}")
        timeout = 120 + 20 * (args.inprocess_duration + 1)
        try:
            with open(args.out_dir / "inprocess.log", "w") as log_file:
                rc = subprocess.run(cmd, stderr=log_file, stdout=log_file, timeout=timeout, check=False,
                                    env=self.specs["ours"].env).returncode
        except subprocess.TimeoutExpired:
            self.problems.append(f"in-process rows: no result within {timeout:.0f} s")
            return []
        if not out.exists():
            self.problems.append(f"in-process rows: exit status {rc}, no result (see inprocess.log)")
            return []
        data = json.loads(out.read_text())
        self.problems.extend(f"in-process rows: {p}" for p in data["problems"])
        rows = [from_dict(InprocessRow, r) for r in data["rows"]]
        for r in rows:
            log(f"    in-process {r.size:<5} {r.mode:<5} c={r.concurrency:<2} {r.throughput:9.1f}/s  "
                f"p50 {r.p50_us / 1000:7.3f} ms  p99 {r.p99_us / 1000:7.3f} ms")
        return rows


# --------------------------------------------------------------------------------------------- meta ---
def pkg_version(python: pathlib.Path, dist: str) -> str:
    try:
        out = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                             capture_output=True, text=True, timeout=30, check=False)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


GIT_ENV = "PYTRITON_BENCH_GIT"  # the commit to report where the checkout has no git (a copy on a lent machine)


def git_describe() -> str:
    """The short commit of the checkout (and whether pytriton/ has uncommitted changes); $PYTRITON_BENCH_GIT where
    git cannot say (a copy of the working tree without .git), "?" where neither can."""
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "pytriton"],
                               capture_output=True, text=True, check=False).stdout.strip() if rev else ""
    except OSError:
        rev, dirty = "", ""
    if not rev:
        return os.environ.get(GIT_ENV) or "?"
    return rev + (" + uncommitted changes under pytriton/" if dirty else "")


def perf_analyzer_version(binary: pathlib.Path | None = None) -> str:
    """The tritonclient version perf_analyzer came from, as scripts/install-perf-analyzer stamped it beside the binary
    (`binary`: bin/perf_analyzer beside the perf_analyzer/ folder; default .tools/bin/perf_analyzer)."""
    stamp = (binary or REPO / ".tools" / "bin" / "perf_analyzer").parent.parent / "perf_analyzer" / ".installed"
    if stamp.exists():
        m = re.search(r"tritonclient==(\S+)", stamp.read_text())
        return m.group(1) if m else "?"
    return "?"


def collect_meta(args: argparse.Namespace, result: BenchResult, load_start: float) -> Meta:
    runs = [r.run for smp in result.samples.values() for r in smp.runs()]
    stolen = [r.stolen_cores for r in runs if r.steal_s is not None]
    try:
        rel = str(args.out_dir.relative_to(REPO))
    except ValueError:
        rel = str(args.out_dir)
    return Meta(
        date=args.started.strftime("%Y-%m-%d %H:%M UTC"), machine=procfs.machine_info(), load_start=load_start,
        load_end=procfs.loadavg(), other_cores=median([r.other_cores for r in runs]) or 0.0,
        steal_cores=median(stolen) if stolen else None, git=git_describe(),
        ours_version="pytriton " + pkg_version(args.ours_python, "pytriton"),
        nvidia_version=pkg_version(args.nvidia_python, "nvidia-pytriton"), pa_version=perf_analyzer_version(args.perf_analyzer),
        out_dir_rel=rel,
    )


def write_outputs(args: argparse.Namespace, result: BenchResult, agg: dict[str, ServerAggregate], meta: Meta) -> None:
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(write_report(result, agg, meta))
    log(f"wrote {args.doc}")
    if plot(args.plot, result, agg, meta):
        log(f"wrote {args.plot}")
    else:
        log("matplotlib not available: no plot")


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt


def run_scheduling(args: argparse.Namespace) -> int:
    """`--suite scheduling`: issue 18's rows (bench_lib/scheduling.py), their targets, docs/benchmarks-scheduling.md."""
    from bench_lib import sched_report
    from bench_lib.scheduling import SchedulingBench

    if args.from_results:
        result = json.loads(args.from_results.read_text())
    else:
        log(f"output folder: {args.out_dir}")
        args.out_dir.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            result = SchedulingBench(args, pa_options(args), server_specs(args)).run()
        except KeyboardInterrupt:
            log("interrupted")
            return 130
        result["date"], result["git"] = args.started.strftime("%Y-%m-%d %H:%M UTC"), git_describe()
        (args.out_dir / "results.json").write_text(json.dumps(result, indent=1))
    print(sched_report.summary(result))
    if not args.no_doc:
        args.doc.write_text(sched_report.markdown(result, result.get("date", "?"), result.get("git", "?")))
        log(f"wrote {args.doc}")
    return 1 if result["problems"] else 0


def run_triton_suite(args: argparse.Namespace) -> int:
    """`--vs-triton` or `--many-models`: the real tritonserver's venv checked first (unless ours alone is measured)."""
    from bench_lib.many_models import run_many_models
    from bench_lib.vs_triton import ensure_real, run_vs_triton

    real, why = ensure_real(args, "triton" in args.servers and not args.from_results)
    if why:
        log(f"the real tritonserver cannot run: {why}; `--servers ours` measures ours alone")
        return 2
    meta = {"git": git_describe(), "perf_analyzer": perf_analyzer_version(args.perf_analyzer),
            "ours_version": pkg_version(args.ours_python, "pytriton"),
            "nvidia_pytriton_version": pkg_version(args.nvidia_python, "nvidia-pytriton") if real else "–"}
    if args.vs_triton:
        return run_vs_triton(args, pa_options(args), real, meta)
    return run_many_models(args, real, meta)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.vs_triton or args.many_models is not None:
        return run_triton_suite(args)
    if args.tls:
        from bench_lib.tls_bench import run_tls
        return run_tls(args, pa_options(args), server_specs(args)["ours"])
    if args.suite == "scheduling":
        return run_scheduling(args)
    if args.suite == "wire":
        from bench_lib.wire import run_wire
        return run_wire(args, pa_options(args), server_specs(args), git_describe())
    if args.from_results:
        result, meta = load_results(args.from_results)
    else:
        load_start = procfs.loadavg()
        log(f"output folder: {args.out_dir}")
        args.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            result = Bench(args).run()
        except KeyboardInterrupt:
            log("interrupted")
            return 130
        meta = collect_meta(args, result, load_start)
    agg = aggregate(result)
    if not args.from_results:
        save_results(args.out_dir / "results.json", result, agg, meta)
    print(summary(result, agg))
    if not args.no_doc:
        write_outputs(args, result, agg, meta)
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
