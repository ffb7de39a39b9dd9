#!/usr/bin/env python3
"""N = 1 vs N = 2 front-end processes (`pytriton serve --frontend-processes N`) with perf_analyzer: an identity model
on 16 floats, the same number of workers in all (2), concurrency 64, gRPC and HTTP; throughput, latency, and the
CPU the server's processes (front-ends and workers) and perf_analyzer spent per request. Short runs; the figures
go to docs/multi-frontend.md.

    .venv/bin/python scripts/frontend_processes_bench.py [--interval 2000] [--repeats 2] [--perf-analyzer PATH]
    .venv/bin/python scripts/frontend_processes_bench.py --summarize RESULTS.jsonl   (the table of a saved run)

Other shapes (scripts/device-bench-multife on a 16-core machine): `--processes 1,2,4,8 --workers 8` (instances per
process = workers / N), `--concurrency 64,256`, `--batching` (the dynamic batcher on, --max-batch-size 64),
`--markdown FILE` (the table, with the settings and the machine, to a file). `scripts/bench --suite wire` reuses
`start`, `stop` and `measure` for its multi-front-end rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODEL_ARGS = ["tests.models:identity", "--model-name", "identity", "--input", "IN_X:fp32:16", "--output",
              "OUT_X:fp32:16", "--no-allow-client-shm", "--grpc-address", "127.0.0.1", "--http-address",
              "127.0.0.1", "--metrics-address", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
              "--metrics-port", "0", "--log-level", "warning"]


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = pathlib.Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(text[text.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def cpu_s(pids: list[int]) -> dict[int, float]:
    """utime + stime of each process, in seconds."""
    out = {}
    for pid in pids:
        try:
            text = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        out[pid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the machine since boot."""
    values = [int(v) for v in pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


BATCHING_ARGS = ["--max-batch-size", "64", "--dynamic-batching"]  # the dynamic batcher on (delay 0)


def start(processes: int, instances: int, log: pathlib.Path, extra: list[str] | None = None,
          python: str = sys.executable) -> tuple[subprocess.Popen, dict[str, int]]:
    """`pytriton serve` the identity model with N front-end processes (more serve options in `extra`); the server and
    its gRPC and HTTP ports once it is ready."""
    args = [python, "-m", "pytriton.cli", "serve", *MODEL_ARGS, "--instances", str(instances),
            "--frontend-processes", str(processes), "--log-level", "info", *(extra or [])]
    handle = log.open("w")
    server = subprocess.Popen(args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTRITON_EXIT_WITH_PARENT": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = log.read_text()
        if "pytriton server ready" in text:
            ports = {k: int(v) for k, v in re.findall(r"Started (\w+)[^\n]* at [^:]+:(\d+)", text)}
            return server, {"grpc": ports["GRPCInferenceService"], "http": ports["HTTPService"]}
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    server.wait()
    raise RuntimeError(f"server did not start:\n{log.read_text()}")


def stop(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGINT)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def inference_count(http_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/models/identity/stats", timeout=10) as response:
        return int(json.load(response)["model_stats"][0]["inference_count"])


def measure(pa: str, protocol: str, port: int, http_port: int, server: subprocess.Popen, interval_ms: int,
            tmp: pathlib.Path, concurrency: int = 64, max_trials: int = 4) -> dict:
    csv_path = tmp / f"pa_{protocol}.csv"
    command = [pa, "-m", "identity", "-i", protocol, "-u", f"127.0.0.1:{port}",
               "--concurrency-range", str(concurrency),
               "-b", "1", "--measurement-interval", str(interval_ms), "--max-trials", str(max_trials),
               "--stability-percentage", "50", "--input-data", "zero", "-f", str(csv_path)]
    tree = descendants(server.pid)
    before_count = inference_count(http_port)
    before_cpu, before_machine, t0 = cpu_s(tree), machine_busy(), time.monotonic()
    pa_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pa_cpu = 0.0
    while pa_process.poll() is None:  # perf_analyzer's own CPU: read while it runs (it is gone after)
        pa_cpu = max(pa_cpu, sum(cpu_s([pa_process.pid]).values()))
        time.sleep(0.1)
    output = pa_process.stdout.read() if pa_process.stdout else ""
    wall = time.monotonic() - t0
    after_cpu, after_machine = cpu_s(tree), machine_busy()
    requests = inference_count(http_port) - before_count
    if pa_process.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed:\n{output}")
    with csv_path.open() as f:
        row = next(r for r in csv.DictReader(f) if r.get("Concurrency"))
    server_cpu = sum(after_cpu.get(p, 0.0) - before_cpu.get(p, 0.0) for p in tree)
    per_process = {p: round(after_cpu.get(p, 0.0) - before_cpu.get(p, 0.0), 2) for p in tree}
    busy = (after_machine[0] - before_machine[0]) / max(after_machine[1] - before_machine[1], 1) * (os.cpu_count() or 1)
    return {"protocol": protocol, "concurrency": concurrency, "throughput": float(row["Inferences/Second"]),
            "p50_ms": int(row["p50 latency"]) / 1000, "p99_ms": int(row["p99 latency"]) / 1000,
            "requests": requests, "wall_s": round(wall, 1),
            "server_cpu_us_per_req": round(server_cpu / max(requests, 1) * 1e6),
            "pa_cpu_us_per_req": round(pa_cpu / max(requests, 1) * 1e6),
            "machine_busy_cores": round(busy, 2), "cpu_by_process_s": per_process}


def measure_retried(*args: object) -> dict:
    """measure(*args), once more when perf_analyzer found no stable window (a noisy machine); its RuntimeError after
    that, or at once for any other failure."""
    try:
        return measure(*args)  # type: ignore[arg-type]
    except RuntimeError as e:
        if "stable measure" not in str(e):
            raise
        print(f"no stable measurement ({args[1]}); retrying once", file=sys.stderr, flush=True)
    return measure(*args)  # type: ignore[arg-type]


def failure_line(error: BaseException) -> str:
    """A failure's message on one line: its first line and its last (perf_analyzer's output sits between)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")


def table(results: list[dict]) -> str:
    """The markdown table of the docs: one row per run, and the other load of the machine during it (busy cores
    minus the server's and perf_analyzer's)."""
    rows = ["| N | protocol | c | repeat | infer/s | p50 ms | p99 ms | server CPU µs/req | perf_analyzer CPU µs/req "
            "| other load (cores) |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    key = lambda r: (r["protocol"], r.get("concurrency", 64), r["frontend_processes"], r["repeat"])  # noqa: E731
    for r in sorted(results, key=key):
        ours = (r["server_cpu_us_per_req"] + r["pa_cpu_us_per_req"]) * r["requests"] / 1e6 / r["wall_s"]
        rows.append(f"| {r['frontend_processes']} | {r['protocol']} | {r.get('concurrency', 64)} | {r['repeat']} "
                    f"| {r['throughput']:,.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['server_cpu_us_per_req']} "
                    f"| {r['pa_cpu_us_per_req']} | {max(0.0, r['machine_busy_cores'] - ours):.2f} |")
    return "\n".join(rows)


def int_list(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]."""
    return [int(x) for x in text.split(",") if x.strip()]


def shapes(processes: list[int], workers: int) -> list[tuple[int, int]]:
    """(front-end processes, instances each) with `workers` workers in all.

    Raises:
        ValueError: a process count that does not divide the workers.
    """
    bad = [n for n in processes if n < 1 or workers % n]
    if bad:
        raise ValueError(f"--workers {workers} is not a multiple of --processes {bad}: every shape runs the same "
                         "number of workers")
    return [(n, workers // n) for n in processes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=int, default=2000, help="perf_analyzer --measurement-interval ms")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--processes", default="1,2", help="front-end process counts to compare (1,2)")
    parser.add_argument("--workers", type=int, default=2, help="workers in all, the same in every shape (2)")
    parser.add_argument("--concurrency", default="64", help="perf_analyzer concurrencies, one run each (64)")
    parser.add_argument("--protocols", default="grpc,http")
    parser.add_argument("--batching", action="store_true", help="dynamic batching on (--max-batch-size 64)")
    parser.add_argument("--markdown", type=pathlib.Path, help="also write the table, settings and machine here")
    parser.add_argument("--perf-analyzer", default=str(REPO / ".tools" / "bin" / "perf_analyzer"),
                        help="(scripts/install-perf-analyzer puts it in .tools/bin of the main checkout)")
    parser.add_argument("--summarize", metavar="FILE", help="print the table of the JSON lines of an earlier run")
    args = parser.parse_args(argv)
    if args.summarize:
        lines = pathlib.Path(args.summarize).read_text().splitlines()
        print(table([json.loads(line) for line in lines if line.startswith("{")]))
        return 0
    try:
        launches = shapes(int_list(args.processes), args.workers)
    except ValueError as e:
        parser.error(str(e))
    protocols = [p for p in args.protocols.split(",") if p]
    extra = BATCHING_ARGS if args.batching else []
    results, failures, load_start, t0 = [], [], os.getloadavg()[0], time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        tmp = pathlib.Path(folder)
        for repeat in range(args.repeats):
            for processes, instances in launches if repeat % 2 == 0 else list(reversed(launches)):
                server, ports = start(processes, instances, tmp / "server.log", extra)
                try:
                    for protocol in protocols:
                        for concurrency in int_list(args.concurrency):
                            try:
                                result = measure_retried(args.perf_analyzer, protocol, ports[protocol], ports["http"],
                                                         server, args.interval, tmp, concurrency)
                            except (RuntimeError, OSError, StopIteration, ValueError) as e:  # the others still run
                                failures.append(f"N = {processes} {protocol} c = {concurrency}: {failure_line(e)}")
                                print(failures[-1], file=sys.stderr, flush=True)
                                continue
                            result.update(repeat=repeat, frontend_processes=processes, instances_each=instances,
                                          loadavg=os.getloadavg()[0])
                            print(json.dumps(result), flush=True)
                            results.append(result)
                finally:
                    stop(server)
    print(table(results))
    if args.markdown:
        args.markdown.write_text(markdown(args, results, load_start, time.monotonic() - t0, failures))
        print(f"wrote {args.markdown}", file=sys.stderr)
    return 1 if failures else 0


def markdown(args: argparse.Namespace, results: list[dict], load_start: float, elapsed_s: float,
             failures: list[str] | None = None) -> str:
    """The table with what produced it: settings, the machine, the load."""
    cpu = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    return "\n".join([
        "# Front-end processes: N = " + args.processes, "",
        f"`scripts/frontend_processes_bench.py` {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: the identity "
        f"model on 16 floats, {args.workers} workers in every row (instances per process = {args.workers} / N), "
        f"dynamic batching {'on (max_batch_size 64)' if args.batching else 'off'}; perf_analyzer at "
        f"c = {args.concurrency}, {args.interval} ms windows; {args.repeats} repeat(s), alternating the order. "
        f"{cpu}, {os.cpu_count()} CPUs; "
        f"load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {elapsed_s:.0f} s.", "",
        table(results), "", *(["Runs that gave no figure:", ""] + [f"- {f}" for f in failures] + [""]
                               if failures else [])])


if __name__ == "__main__":
    sys.exit(main())
