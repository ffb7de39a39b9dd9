"""The wire suite (``scripts/bench --suite wire``): issue 21's rows, each against its target.

1. ``large``: 16 MiB (``double_16mib``, y = 2x), dynamic batching on in both servers (serve_double.py
   ``--batching dynamic``), perf_analyzer at c = 2 over gRPC and HTTP, without shared memory and through system
   shared memory: ours / NVIDIA >= 2.5x without shm and >= 6x with it, and >= 2 GiB/s of tensor data each way
   (16 MiB x throughput) without shm;
2. ``conn``: 16 floats (``double_small``), dynamic batching on in both, c = 8, 64 and 256 (one perf_analyzer run
   per concurrency, so that each has its own CPU readings), gRPC and HTTP: ours / NVIDIA >= 4x at c = 64 and 256,
   and ours at 64 and 256 >= ours at 8;
3. ``connfe``: ``conn`` with ours served by ``pytriton serve --model-repository R --frontend-processes N`` (the
   ``repo`` server kind: the same y = 2x on 16 floats as a Python-backend model, max_batch_size 64, dynamic batching
   with delay 0, one instance in each front-end process, so N in all), N from ``--wire-frontends`` (default 2, a
   list such as ``4,8`` runs each), c = 8, 64 and 256, gRPC and HTTP, against NVIDIA's ``conn`` figures from the
   same run (its default single server, one instance; measured for this row even when ``conn`` is not selected):
   ours with N front-end processes / NVIDIA >= 4x at c = 64 and 256. The server CPU covers the CLI's process, the
   N front-end processes and their workers (checked: a launch whose tree lacks a front-end process is a problem);
4. ``multife`` (ours only, no target): ``pytriton serve --frontend-processes N``, N = 1 and 2 with 2 workers in
   all, the identity model on 16 floats with the dynamic batcher, c = 64, gRPC and HTTP
   (scripts/frontend_processes_bench.py's launch and measurement, reused).

Every run records the server's CPU per request (its process tree's utime + stime over the run / the requests its
statistics counted), perf_analyzer's own (its utime + stime, which the machine shares: 2 cores here), each side's
share of the machine in cores, the CPU other processes used meanwhile and the load average. Launches alternate
the servers' order from repeat to repeat; the report (wire_report.py) takes medians over the repeats.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import pathlib
import signal
import sys
import tempfile
import time
import types
from typing import Callable, NoReturn

from bench_lib import procfs
from bench_lib.measure import log, run_case
from bench_lib.perf_analyzer import PaOptions
from bench_lib.results import median
from bench_lib.scheduling import SCase, serve_launch
from bench_lib.servers import Server, ServerSpec, group_ready

ROWS = ("large", "conn", "connfe", "multife")
LARGE_CONCURRENCY = 2
CONN_CONCURRENCIES = (8, 64, 256)
MULTIFE_CONCURRENCY = 64
MULTIFE_SHAPES = ((1, 2), (2, 1))  # (front-end processes, instances each): 2 workers in all
BYTES_PER_REQUEST = {"large": 4194304 * 4, "conn": 16 * 4, "connfe": 16 * 4, "multife": 16 * 4}  # each way


def parse_rows(text: str) -> list[str]:
    """The --wire-rows list, in the suite's order.

    Raises:
        ValueError: a row name the suite does not have.
    """
    rows = [r for r in text.split(",") if r]
    bad = sorted(set(rows) - set(ROWS))
    if bad:
        raise ValueError(f"unknown --wire-rows: {bad} (choose from {','.join(ROWS)})")
    return [r for r in ROWS if r in rows]


def parse_frontends(text: str) -> list[int]:
    """The --wire-frontends list (front-end processes for the connfe row), in the order typed, each once.

    Raises:
        ValueError: an entry that is not a whole number >= 1, or no entry at all.
    """
    out: list[int] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"--wire-frontends: {item!r} is not a number of front-end processes (1 or more)")
        if int(item) not in out:
            out.append(int(item))
    if not out:
        raise ValueError("--wire-frontends: no number of front-end processes given")
    return out


def sample(throughput: float, p50_us: float, p99_us: float, wall_s: float, requests: int | None,
           server_cpu_s: float, client_cpu_s: float, other_cpu_s: float, load: float) -> dict[str, float | None]:
    """One run's figures as stored in results.json (per request figures None when the server counted nothing)."""
    per = (lambda cpu: cpu / requests * 1e6) if requests else (lambda cpu: None)
    return {"throughput": throughput, "p50_us": p50_us, "p99_us": p99_us, "wall_s": wall_s,
            "requests": requests, "server_cpu_us": per(server_cpu_s), "client_cpu_us": per(client_cpu_s),
            "server_cores": server_cpu_s / wall_s, "client_cores": client_cpu_s / wall_s,
            "other_cores": other_cpu_s / wall_s, "load": load}


def leftovers(tree: dict[int, int | None], shm: set[str], wait_s: float = 10.0) -> list[str]:
    """What a stopped server left: processes of its tree still alive after `wait_s` (killed) and /dev/shm files it
    had open or mapped that still exist (removed)."""
    def alive() -> list[int]:
        return [pid for pid, st in tree.items() if st is not None and procfs.start_time(pid) == st]

    deadline = time.monotonic() + wait_s
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    found = []
    for pid in alive():
        found.append(f"process {pid} outlived the server; killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for path in sorted(p for p in shm if os.path.exists(p)):
        found.append(f"{path} left in /dev/shm; removed")
        try:
            os.unlink(path)
        except OSError:
            pass
    return found


class WireBench:
    def __init__(self, args: argparse.Namespace, opts: PaOptions, specs: dict[str, ServerSpec]) -> None:
        self.args, self.opts, self.specs = args, opts, specs
        self.rows = args.wire_rows
        self.samples: dict[str, list[dict[str, float | None]]] = {}  # figure key -> one dict per repeat
        self.problems: list[str] = []

    def _serve(self, server: Server, tag: str, body: Callable[[Server], None]) -> None:
        serve_launch(server, self.args, tag, body, self.problems)

    def _add(self, key: str, s: dict[str, float | None]) -> None:
        self.samples.setdefault(key, []).append(s)
        fmt = (lambda x: "–" if x is None else f"{x:.0f}")
        log(f"    {key:<34} {s['throughput']:9.1f}/s  p50 {(s['p50_us'] or 0) / 1000:7.2f} ms  CPU us/req server "
            f"{fmt(s['server_cpu_us'])} client {fmt(s['client_cpu_us'])}  (other load {s['other_cores']:.2f} cores)")

    def _pa(self, server: Server, case: SCase, concurrency: int, prefix: str, tag: str) -> None:
        # (an SCase reads as a Case)
        res = run_case(self.opts, server, case, str(concurrency),  # type: ignore[arg-type]
                       self.args.out_dir, tag, self.problems)
        r = res.get(concurrency)
        if r is None:
            return
        run = r.run
        self._add(f"{prefix}/c{concurrency}", sample(r.throughput, r.p50_us, r.p99_us, run.wall_s, run.requests,
                                                     run.server_cpu_s, run.pa_cpu_s, run.other_cpu_s, run.load_end))

    def _out(self, tag: str) -> pathlib.Path:
        return self.args.out_dir / f"{tag}-server.log"

    def large(self, rep: int, name: str) -> None:
        tag = f"w{rep + 1}-{name}-large"
        server = Server(self.specs[name], "dynamic", ["double_16mib"], self._out(tag), self.args.out_dir)

        def body(s: Server) -> None:
            for protocol in ("grpc", "http"):
                for shm in ("none", "system"):
                    case = SCase(protocol, "double_16mib", shm, f"{protocol}-{shm}")
                    self._pa(s, case, LARGE_CONCURRENCY, f"large/{name}/{case.key}", f"{tag}-{case.key}")
        self._serve(server, tag, body)

    def conn(self, rep: int, name: str) -> None:
        tag = f"w{rep + 1}-{name}-conn"
        server = Server(self.specs[name], "dynamic", ["double_small"], self._out(tag), self.args.out_dir)

        def body(s: Server) -> None:
            for protocol in ("grpc", "http"):
                case = SCase(protocol, "double_small", "none", protocol)
                for c in CONN_CONCURRENCIES:
                    self._pa(s, case, c, f"conn/{name}/{protocol}", f"{tag}-{protocol}-c{c}")
        self._serve(server, tag, body)

    def connfe(self, rep: int, processes: int) -> None:
        """conn's runs against ours through `pytriton serve --frontend-processes N` (the repo server kind)."""
        tag = f"w{rep + 1}-ours-connfe{processes}"
        server = Server(self.specs["repo"], "dynamic", ["double_small"], self._out(tag), self.args.out_dir,
                        ["--frontend-processes", str(processes)])

        def body(s: Server) -> None:
            if not self._group_ready(s, processes, tag):
                return
            for protocol in ("grpc", "http"):
                case = SCase(protocol, "double_small", "none", protocol)
                for c in CONN_CONCURRENCIES:
                    self._pa(s, case, c, f"connfe/ours/n{processes}-{protocol}", f"{tag}-{protocol}-c{c}")
        self._serve(server, tag, body)

    def _group_ready(self, server: Server, processes: int, tag: str) -> bool:
        """servers.group_ready, its problem (if any) added to the suite's."""
        problem = group_ready(server, processes, self.args.startup_timeout)
        if problem is None:
            log(f"{tag}: {processes} front-end process(es) in a tree of {len(server.refresh_tree())} processes")
            return True
        self.problems.append(f"{tag}: {problem}")
        return False

    def multife(self, rep: int) -> None:
        """scripts/frontend_processes_bench.py's launch and measurement, N = 1 and 2, the dynamic batcher on."""
        import frontend_processes_bench as fpb  # scripts/ is on sys.path (bench.py, tests/scripts/conftest.py)

        shapes = MULTIFE_SHAPES if rep % 2 == 0 else tuple(reversed(MULTIFE_SHAPES))
        for processes, instances in shapes:
            tag = f"w{rep + 1}-ours-multife{processes}"
            log(f"{tag}: starting ours with --frontend-processes {processes} --instances {instances}")
            with tempfile.TemporaryDirectory(prefix="wire-multife-") as folder:
                try:
                    server, ports = fpb.start(processes, instances, self._out(tag), fpb.BATCHING_ARGS,
                                              python=str(self.specs["ours"].python))
                except RuntimeError as e:
                    self.problems.append(f"{tag}: {str(e).splitlines()[0]} (log {self._out(tag)})")
                    continue
                try:
                    for protocol in ("grpc", "http"):
                        self._multife_run(fpb, tag, f"multife/ours/n{processes}-{protocol}",
                                          (protocol, ports[protocol], ports["http"], server,
                                           self.opts.interval_ms, pathlib.Path(folder)))
                finally:
                    tree = {pid: procfs.start_time(pid) for pid in procfs.descendants(server.pid)}
                    shm = procfs.shm_files(list(tree))
                    fpb.stop(server)
                    if server.returncode not in (0, -signal.SIGINT):
                        self.problems.append(f"{tag}: server exited with status {server.returncode}")
                    self.problems.extend(f"{tag}: {p}" for p in leftovers(tree, shm))

    def _multife_run(self, fpb: types.ModuleType, tag: str, prefix: str, how: tuple) -> None:
        """One frontend_processes_bench measurement (once more when perf_analyzer found no stable window)."""
        busy0 = procfs.busy_jiffies()
        try:
            r = fpb.measure_retried(str(self.opts.binary), *how, MULTIFE_CONCURRENCY, self.opts.max_trials)
        except (RuntimeError, OSError, StopIteration, ValueError) as e:
            self.problems.append(f"{tag} {how[0]}: {fpb.failure_line(e)}"[:300])
            return
        total = (procfs.busy_jiffies() - busy0) / procfs.CLK_TCK
        n = r["requests"]
        server_s, client_s = r["server_cpu_us_per_req"] * n / 1e6, r["pa_cpu_us_per_req"] * n / 1e6
        self._add(f"{prefix}/c{MULTIFE_CONCURRENCY}",
                  sample(r["throughput"], r["p50_ms"] * 1000, r["p99_ms"] * 1000, r["wall_s"], n, server_s, client_s,
                         max(0.0, total - server_s - client_s), procfs.loadavg()))

    def run(self) -> dict:
        t0, load_start = time.time(), procfs.loadavg()
        servers = [s for s in ("ours", "nvidia") if s in self.args.servers]
        for rep in range(self.args.repeats):
            order = servers if rep % 2 == 0 else list(reversed(servers))
            if "large" in self.rows:
                for name in order:
                    self.large(rep, name)
            for launch in self._conn_launches(servers, rep):
                launch()
            if "multife" in self.rows and "ours" in servers:
                self.multife(rep)
        others = [s["other_cores"] for runs in self.samples.values() for s in runs]
        return {"samples": self.samples, "problems": self.problems, "elapsed_s": time.time() - t0,
                "load_start": load_start, "load_end": procfs.loadavg(), "other_cores": median(others),
                "machine": dataclasses.asdict(procfs.machine_info()), "repeats": self.args.repeats,
                "rows": list(self.rows), "interval_ms": self.args.interval,
                "frontends": list(self.args.wire_frontends) if "connfe" in self.rows else []}

    def _conn_launches(self, servers: list[str], rep: int) -> list[Callable[[], None]]:
        """One repeat's 16-float launches: conn's servers, then ours with each N front-end processes (connfe; with
        NVIDIA's conn launch for its ratios even when conn is not selected); in reverse order every other repeat."""
        names = servers if "conn" in self.rows else []
        if "connfe" in self.rows and "ours" in servers and "conn" not in self.rows and "nvidia" in servers:
            names = ["nvidia"]
        launches: list[Callable[[], None]] = [functools.partial(self.conn, rep, name) for name in names]
        if "connfe" in self.rows and "ours" in servers:
            launches += [functools.partial(self.connfe, rep, n) for n in self.args.wire_frontends]
        return launches if rep % 2 == 0 else launches[::-1]


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt


def run_wire(args: argparse.Namespace, opts: PaOptions, specs: dict[str, ServerSpec], git: str) -> int:
    """`--suite wire`: measure (or read --from-results), print the summary, write docs/benchmarks-wire.md."""
    from bench_lib import wire_report

    if args.from_results:
        result = json.loads(args.from_results.read_text())
    else:
        log(f"output folder: {args.out_dir}")
        args.out_dir.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            result = WireBench(args, opts, specs).run()
        except KeyboardInterrupt:
            log("interrupted")
            return 130
        result["date"], result["git"] = args.started.strftime("%Y-%m-%d %H:%M UTC"), git
        (args.out_dir / "results.json").write_text(json.dumps(result, indent=1))
    print(wire_report.summary(result), file=sys.stdout)
    if not args.no_doc:
        args.doc.write_text(wire_report.markdown(result))
        log(f"wrote {args.doc}")
    return 1 if result["problems"] else 0
