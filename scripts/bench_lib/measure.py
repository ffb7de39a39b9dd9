"""One perf_analyzer run against a running server, with the CPU and memory it cost on each side."""

from __future__ import annotations

import dataclasses
import pathlib
import resource
import subprocess
import sys
import threading
import time

from bench_lib import perf_analyzer as pa
from bench_lib import procfs
from bench_lib.cases import Case, expand_range
from bench_lib.results import CaseRun, PaCounts, RunInfo
from bench_lib.servers import REPO, Server


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class MemorySampler:
    """Peak RSS/PSS of a server's process tree, sampled every 0.5 s in a thread until stop()."""

    def __init__(self, server: Server) -> None:
        self.server, self.rss, self.pss = server, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            rss, pss = procfs.memory_kib(self.server.refresh_tree())
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class _Readings:
    """CPU counters at the start of a run; `finish` turns them into the run's RunInfo."""

    def __init__(self, server: Server) -> None:
        pids = server.refresh_tree()
        self.cpu, self.busy, self.steal = procfs.cpu_seconds(pids), procfs.busy_jiffies(), procfs.steal_jiffies()
        self.load = procfs.loadavg()
        self.ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.t0 = time.perf_counter()

    def finish(self, server: Server, sampler: MemorySampler, rc: int) -> RunInfo:
        """The run's figures; `requests` and `unstable` are for the caller to fill in (read after the CPU)."""
        wall = time.perf_counter() - self.t0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_cpu = procfs.cpu_seconds(server.refresh_tree()) - self.cpu
        pa_cpu = (ru.ru_utime - self.ru.ru_utime) + (ru.ru_stime - self.ru.ru_stime)
        total_cpu = (procfs.busy_jiffies() - self.busy) / procfs.CLK_TCK
        return RunInfo(
            wall_s=wall, server_cpu_s=server_cpu, pa_cpu_s=pa_cpu, total_cpu_s=total_cpu,
            other_cpu_s=max(0.0, total_cpu - server_cpu - pa_cpu),
            steal_s=(procfs.steal_jiffies() - self.steal) / procfs.CLK_TCK,
            load_start=self.load, load_end=procfs.loadavg(), requests=None, peak_rss_kib=sampler.rss,
            peak_pss_kib=sampler.pss, rc=rc, unstable=False,
        )


def _run_once(opts: pa.PaOptions, cmd: list[str], txt_path: pathlib.Path) -> tuple[int, bool]:
    """(exit status, killed for running past the timeout); perf_analyzer never outlives an interrupt."""
    with open(txt_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            return proc.wait(opts.timeout_s), False
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(), True
        except BaseException:
            proc.kill()
            proc.wait()
            raise


def run_case(opts: pa.PaOptions, server: Server, case: Case, concurrency: str, outdir: pathlib.Path, tag: str,
             problems: list[str]) -> dict[int, CaseRun]:
    """One perf_analyzer run (retried once for the concurrencies it could not stabilise); results per concurrency."""
    port = server.grpc_port if case.protocol == "grpc" else server.http_port
    results: dict[int, CaseRun] = {}
    wanted = sorted(set(expand_range(concurrency)))
    for attempt in (1, 2):
        csv_path = outdir / f"{tag}.{attempt}.csv"
        txt_path = outdir / f"{tag}.{attempt}.txt"
        cmd = pa.command(opts, case, port, concurrency, csv_path)
        if attempt == 1:
            log("  " + " ".join(c.replace(str(REPO) + "/", "") for c in cmd))
        model_count0 = server.inference_count(case.model)
        readings = _Readings(server)
        sampler = MemorySampler(server)
        try:
            rc, timed_out = _run_once(opts, cmd, txt_path)
        finally:
            sampler.stop()
        run_info = readings.finish(server, sampler, rc)
        model_count1 = server.inference_count(case.model)
        requests = None
        if model_count0 is not None and model_count1 is not None:
            requests = model_count1 - model_count0
        text = txt_path.read_text(errors="replace")
        unstable = pa.UNSTABLE in text
        run_info = dataclasses.replace(
            run_info, requests=requests, unstable=unstable,
            server_cpu_us_per_request=run_info.server_cpu_s / requests * 1e6 if requests else None)
        problem = pa.verdict(tag, rc, timed_out, unstable, pa.error_lines(text), opts, txt_path)
        if problem:
            problems.append(problem)
        counts = pa.parse_text(text)
        for row in pa.read_csv(csv_path):
            if row.concurrency in results:
                continue
            cnt = counts.get(row.concurrency, PaCounts())
            mismatch = pa.count_mismatch(row.concurrency, cnt)
            if mismatch:
                problems.append(f"{tag} c={row.concurrency}: {mismatch}")
            results[row.concurrency] = CaseRun(throughput=row.throughput, p50_us=row.p50_us, p90_us=row.p90_us,
                                               p99_us=row.p99_us, counts=cnt, attempt=attempt, run=run_info)
        missing = [c for c in wanted if c not in results]
        if not missing or timed_out:
            break
        if attempt == 1:
            log(f"  {tag}: no stable result for concurrency {missing} (noisy machine?); retrying those once")
            if len(missing) == 1:
                concurrency = str(missing[0])
        else:
            problems.append(f"{tag}: no stable measurement for concurrency {missing} after a retry ({txt_path})")
    return results
