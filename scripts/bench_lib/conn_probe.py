"""Many connections: CPU and system calls per request at high concurrency (docs/profile.md, "Many connections").

    .venv/bin/python scripts/bench_lib/conn_probe.py --protocol grpc --concurrency 64,256
    .venv/bin/python scripts/bench_lib/conn_probe.py --protocol http --concurrency 256 --strace
    .venv/bin/python scripts/bench_lib/conn_probe.py --code /tmp/main-export ...   # another checkout's pytriton

Serves `double_small` (16 floats, dynamic batching) with serve_double.py, warms it up with one perf_analyzer run,
then for each concurrency measures one perf_analyzer run: user + system CPU of the server process, of the user
process (which runs the callable, `Triton.bind`) and of perf_analyzer itself (its rusage from `wait4`), each divided
by the inference count the server's statistics report for that run; requests per execution; voluntary context
switches of the server. With `--strace`, a second run per concurrency is counted by `strace -c -f` attached to the
server process: system calls per request by name (strace slows the server many times over; only the counts mean
anything). `--code DIR` puts DIR first on the server's PYTHONPATH (an exported checkout, to compare two versions
with one venv).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench_lib import procfs  # noqa: E402
from bench_lib.servers import REPO, free_port, stop_process, wait_model_ready  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
MODEL = "double_small"


def _cpu(pid: int) -> tuple[int, int, int]:
    """utime, stime (clock ticks) and voluntary context switches of every thread of `pid`."""
    fields = procfs.stat(pid)
    if fields is None:
        return 0, 0, 0
    switches = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches"):
                        switches += int(line.split()[1])
    except OSError:
        pass
    return int(fields[11]), int(fields[12]), switches


def _role(pid: int) -> str:
    line = procfs.cmdline(pid)
    if "serve_double.py" in line:
        return "user process"
    if "pytriton" in line:
        return "server"
    return line[:30]


def _count(port: int) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{MODEL}/stats", timeout=5) as answer:
        stats = json.loads(answer.read())["model_stats"]
    return sum(int(s["inference_count"]) for s in stats), sum(int(s["execution_count"]) for s in stats)


def _run_pa(cmd: list[str]) -> tuple[str, float]:
    """Run perf_analyzer; its output and its user + system CPU seconds (rusage of the child)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return out, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--interval", type=int, default=3000, help="perf_analyzer --measurement-interval (ms)")
    parser.add_argument("--strace", action="store_true", help="also count system calls per request")
    parser.add_argument("--code", help="a directory put first on the server's PYTHONPATH")
    parser.add_argument("--py-spy", help="py-spy binary: record the server during each measured run (raw, self time)")
    parser.add_argument("--perf-analyzer", default=str(REPO / ".tools" / "bin" / "perf_analyzer"))
    args = parser.parse_args()
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = args.code + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [str(REPO / ".venv" / "bin" / "python"), str(HERE / "serve_double.py"), "--http-port", str(http),
           "--grpc-port", str(grpc_port), "--metrics-port", str(metrics), "--batching", "dynamic", "--models", MODEL]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=args.code or str(REPO), start_new_session=True, env=env, text=True)
    try:
        wait_model_ready(http, MODEL)
        port = grpc_port if args.protocol == "grpc" else http
        pids = procfs.descendants(server.pid)
        roles = {pid: _role(pid) for pid in pids}
        server_pid = next(pid for pid, role in roles.items() if role == "server")
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            pa = [args.perf_analyzer, "-m", MODEL, "-i", args.protocol, "-u", f"127.0.0.1:{port}",
                  "--shared-memory", "none", "--concurrency-range", str(concurrency), "-b", "1", "--max-trials", "3",
                  "--stability-percentage", "50", "--input-data", "zero"]
            _run_pa([*pa, "--measurement-interval", "1000"])  # warm-up (and the connections' first requests)
            before = {pid: _cpu(pid) for pid in pids}
            count0, executions0 = _count(http)
            spy = None
            if args.py_spy:
                spy = subprocess.Popen([args.py_spy, "record", "-p", str(server_pid), "-r", "200", "-f", "raw",
                                        "--nonblocking", "-d", str(args.interval * 3 // 1000), "-o",
                                        f"/tmp/conn_probe_{args.protocol}_{concurrency}.txt"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started = time.monotonic()
            out, pa_cpu = _run_pa([*pa, "--measurement-interval", str(args.interval)])
            elapsed = time.monotonic() - started
            if spy is not None:
                spy.wait(60)
            after = {pid: _cpu(pid) for pid in pids}
            count1, executions1 = _count(http)
            requests = max(count1 - count0, 1)
            scale = 1e6 / procfs.CLK_TCK / requests
            throughput = re.findall(r"Throughput: ([0-9.]+) infer/sec", out)
            print(f"{args.protocol} c={concurrency}: {requests} requests in {elapsed:.1f} s ({requests / elapsed:.0f}/s"
                  f" over the whole run; perf_analyzer {throughput[-1] if throughput else '?'} infer/s),"
                  f" {requests / max(executions1 - executions0, 1):.1f} per execution; load {procfs.loadavg():.2f}")
            for pid in pids:
                user, system, switches = (a - b for a, b in zip(after[pid], before[pid]))
                print(f"  {roles[pid]:<13} {user * scale:5.0f} user + {system * scale:4.0f} sys = "
                      f"{(user + system) * scale:5.0f} us/request; {switches / requests:.2f} voluntary switches")
            print(f"  perf_analyzer {pa_cpu * 1e6 / requests:5.0f} us/request (user + sys, whole run)")
            if args.strace:
                _strace(server_pid, pa, http)
    finally:
        stop_process(server)


def _strace(server_pid: int, pa: list[str], http: int) -> None:
    """System calls of the server process per request over one perf_analyzer run (under strace)."""
    log = pathlib.Path(f"/tmp/conn_probe_strace_{os.getpid()}.txt")
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(log), "-p", str(server_pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attach to every thread
    count0, _ = _count(http)
    _run_pa([*pa, "--measurement-interval", "2000"])
    count1, _ = _count(http)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(30)
    requests = max(count1 - count0, 1)
    rows = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] not in ("total",):
            calls = int(parts[3])
            rows.append((calls, parts[-1]))
    log.unlink()
    total = sum(calls for calls, _ in rows)
    print(f"  strace: {requests} requests, {total / requests:.2f} system calls per request (server process): "
          + ", ".join(f"{name} {calls / requests:.2f}" for calls, name in sorted(rows, reverse=True)[:8]))


if __name__ == "__main__":
    main()
