"""The scheduling suite (``scripts/bench --suite scheduling``): issue 18's rows, each against its target.

1. dynamic batching on in both servers (PyTriton's default ``DynamicBatcher()``), gRPC, 16 floats (no shm) and
   1 MiB through system shm, c = 8 and 16 (serve_double.py under each venv): ours >= 3x / >= 5x NVIDIA's;
2. a CPU-bound pure-Python callable (sched_models.spin, a Python loop, ~2 ms per request), 1 and 2 instances:
   ours ``pytriton serve ... --instances N`` (worker processes), NVIDIA's a list of N callables (threads of one
   process; serve_spin.py); c = 4: ours with 2 >= 1.7x ours with 1, and >= 1.7x NVIDIA's with 2;
3. a sequence model (sched_models.accumulate, direct strategy, max_batch_size 8) at c = 8 (ours only: NVIDIA
   PyTriton has no sequence batcher) beside the same callable with the dynamic batcher: >= 80 %;
4. response-cache hits vs misses (ours; cache_probe.py, one request at a time): hit p50 <= half a miss's.

Each launch is a server of its own; launches alternate the servers' order from repeat to repeat; figures are
medians over the repeats. The rows reuse the main bench's machinery (Server, run_case, the CPU/load readings).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import subprocess
import time
from typing import Callable

from bench_lib import procfs
from bench_lib.measure import log, run_case
from bench_lib.perf_analyzer import PaOptions
from bench_lib.results import median
from bench_lib.servers import REPO, Server, ServerSpec, log_problems

HERE = pathlib.Path(__file__).resolve().parent
MODELS_FILE = HERE / "sched_models.py"
SERVE_SPIN = HERE / "serve_spin.py"
BATCH_CONCURRENCY = "8:16:8"
SPIN_CONCURRENCY = "4"
SEQ_CONCURRENCY = "8"


@dataclasses.dataclass(frozen=True)
class SCase:
    """A perf_analyzer case of this suite (what run_case and perf_analyzer.command read of a Case)."""

    protocol: str
    model: str
    shm: str
    key: str


@dataclasses.dataclass
class Target:
    row: str
    what: str  # the figure compared, in words
    value: float | None  # the measured ratio
    threshold: float
    higher_is_better: bool = True

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value >= self.threshold if self.higher_is_better else self.value <= self.threshold

    def line(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        val = "no result" if self.value is None else f"{self.value:.2f}"
        verdict = {True: "MET", False: "MISSED", None: "NOT MEASURED"}[self.met]
        return f"{self.row}: {self.what} = {val} (target {op} {self.threshold:g}): {verdict}"


class CmdServer(Server):
    """A Server whose command line is given (ours: `pytriton serve FILE:FN ...`; NVIDIA's: serve_spin.py)."""

    def __init__(self, spec: ServerSpec, argv: Callable[[Server], list[str]], models: list[str],
                 logfile: pathlib.Path, cwd: pathlib.Path) -> None:
        super().__init__(spec, "off", models, logfile, cwd)
        self._argv = argv

    def cmd(self) -> list[str]:
        return self._argv(self)

    def scan_log(self) -> list[str]:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return []
        if "BENCH pytriton package:" not in text:  # the CLI: ask the same python which package it imports
            ask = "import os, pytriton; print(os.path.dirname(pytriton.__file__))"
            found = subprocess.run([str(self.spec.python), "-c", ask], capture_output=True, text=True,
                                   cwd=self.cwd, env=self.spec.env, check=False).stdout.strip()
            text = f"BENCH pytriton package: {found}\n" + text
        expected = REPO / "pytriton" if self.spec.name == "ours" else self.spec.python.parent.parent
        return log_problems(self.spec.name, text, expected, self.logfile)


def ours_cli(fn: str, name: str, *extra: str) -> Callable[[Server], list[str]]:
    def argv(s: Server) -> list[str]:
        return [str(s.spec.python), "-m", "pytriton.cli", "serve", f"{MODELS_FILE}:{fn}", "--model-name", name,
                "--input", "INPUT:fp32:16", "--output", "OUTPUT:fp32:16", "--max-batch-size", "8",
                "--http-port", str(s.http_port), "--grpc-port", str(s.grpc_port),
                "--metrics-port", str(s.metrics_port), *extra]
    return argv


def nvidia_spin(instances: int) -> Callable[[Server], list[str]]:
    def argv(s: Server) -> list[str]:
        return [str(s.spec.python), str(SERVE_SPIN), "--http-port", str(s.http_port), "--grpc-port",
                str(s.grpc_port), "--metrics-port", str(s.metrics_port), "--instances", str(instances)]
    return argv


SEQ_FLAGS = ("--sequence-batching", "direct", "--sequence-control", "start=START",
             "--sequence-control", "ready=READY", "--sequence-control", "corrid=CORRID")
ROWS = ("batching", "cpu", "sequence", "cache")


def serve_launch(server: Server, args: argparse.Namespace, tag: str, body: Callable[[Server], None],
                 problems: list[str]) -> None:
    """Start `server`, let it settle, run `body` on it, stop it; what went wrong is added to `problems`."""
    log(f"{tag}: starting {server.spec.name}")
    try:
        if server.start(args.startup_timeout):
            time.sleep(args.settle)
            body(server)
    finally:
        server.stop()
        problems.extend(server.problems)
        problems.extend(server.scan_log())


class SchedulingBench:
    def __init__(self, args: argparse.Namespace, opts: PaOptions, specs: dict[str, ServerSpec]) -> None:
        self.args, self.opts, self.specs = args, opts, specs
        self.rows = args.sched_rows
        self.samples: dict[str, list[dict[str, float]]] = {}  # figure key -> per repeat {throughput, p50_us}
        self.cache: list[dict] = []
        self.load: list[dict[str, float]] = []
        self.problems: list[str] = []

    # ------------------------------------------------------------------------------------------- launches ---
    def _serve(self, server: Server, tag: str, body: Callable[[Server], None]) -> None:
        serve_launch(server, self.args, tag, body, self.problems)

    def _pa(self, server: Server, case: SCase, concurrency: str, prefix: str, tag: str) -> None:
        res = run_case(self.opts, server, case, concurrency,  # type: ignore[arg-type]  # (an SCase reads as a Case)
                       self.args.out_dir, tag, self.problems)
        for c, r in sorted(res.items()):
            self.samples.setdefault(f"{prefix}/c{c}", []).append({"throughput": r.throughput, "p50_us": r.p50_us})
            self.load.append({"other_cores": r.run.other_cores, "load": r.run.load_end})
            log(f"    {prefix:<34} c={c:<2} {r.throughput:9.1f}/s  p50 {r.p50_us / 1000:7.2f} ms  "
                f"(other load {r.run.other_cores:.2f} cores)")

    def _out(self, tag: str) -> pathlib.Path:
        return self.args.out_dir / f"{tag}-server.log"

    def batching(self, rep: int, name: str) -> None:
        tag = f"s{rep + 1}-{name}-batching"
        server = Server(self.specs[name], "dynamic", ["double_small", "double_1mib"], self._out(tag), self.args.out_dir)

        def body(s: Server) -> None:
            for case in (SCase("grpc", "double_small", "none", "small"),
                         SCase("grpc", "double_1mib", "system", "1mib-shm")):
                self._pa(s, case, BATCH_CONCURRENCY, f"batching/{name}/{case.key}", f"{tag}-{case.key}")
        self._serve(server, tag, body)

    def cpu(self, rep: int, name: str) -> None:
        for n in (1, 2):
            tag = f"s{rep + 1}-{name}-spin{n}"
            argv = ours_cli("spin", "spin", "--no-dynamic-batching", "--instances", str(n)) if name == "ours" \
                else nvidia_spin(n)
            server = CmdServer(self.specs[name], argv, ["spin"], self._out(tag), self.args.out_dir)
            self._serve(server, tag, functools.partial(
                self._pa, case=SCase("grpc", "spin", "none", "spin"), concurrency=SPIN_CONCURRENCY,
                prefix=f"cpu/{name}/i{n}", tag=tag))

    def sequence(self, rep: int) -> None:
        for kind, extra in (("sequence", SEQ_FLAGS), ("dynamic", ("--dynamic-batching",))):
            tag = f"s{rep + 1}-ours-{kind}"
            server = CmdServer(self.specs["ours"], ours_cli("accumulate", "acc", *extra), ["acc"], self._out(tag),
                               self.args.out_dir)
            self._serve(server, tag, functools.partial(self._pa, case=SCase("grpc", "acc", "none", kind),
                                                       concurrency=SEQ_CONCURRENCY, prefix=f"sequence/ours/{kind}",
                                                       tag=tag))

    def response_cache(self, rep: int) -> None:
        tag = f"s{rep + 1}-ours-cache"
        server = CmdServer(self.specs["ours"], ours_cli("double", "double_cached", "--response-cache",
                                                        "--cache-config", "local,size=16777216"),
                           ["double_cached"], self._out(tag), self.args.out_dir)

        def body(s: Server) -> None:
            cmd = [str(self.specs["ours"].python), str(HERE / "cache_probe.py"), "--url", f"127.0.0.1:{s.grpc_port}",
                   "--requests", str(self.args.cache_requests)]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            if out.returncode != 0:
                self.problems.append(f"{tag}: cache_probe exited {out.returncode}: {out.stderr.strip()[-300:]}")
                return
            data = json.loads(out.stdout)
            self.problems.extend(f"{tag}: {p}" for p in data["problems"])
            self.cache.append(data)
            log(f"    cache hit p50 {data['hit']['p50_us'] / 1000:.3f} ms, miss p50 {data['miss']['p50_us'] / 1000:.3f}"
                f" ms (server: {data['server']})")
        self._serve(server, tag, body)

    def run(self) -> dict:
        t0, load_start = time.time(), procfs.loadavg()
        servers = [s for s in ("ours", "nvidia") if s in self.args.servers]
        for rep in range(self.args.repeats):
            order = servers if rep % 2 == 0 else list(reversed(servers))
            for name in order:
                if "batching" in self.rows:
                    self.batching(rep, name)
            for name in order:
                if "cpu" in self.rows:
                    self.cpu(rep, name)
            if "ours" in servers and "sequence" in self.rows:
                self.sequence(rep)
            if "ours" in servers and "cache" in self.rows:
                self.response_cache(rep)
        return {"samples": self.samples, "cache": self.cache, "problems": self.problems,
                "elapsed_s": time.time() - t0, "load_start": load_start, "load_end": procfs.loadavg(),
                "other_cores": median([x["other_cores"] for x in self.load]) if self.load else None,
                "machine": dataclasses.asdict(procfs.machine_info()), "repeats": self.args.repeats,
                "rows": list(self.rows),
                "interval_ms": self.args.interval}
