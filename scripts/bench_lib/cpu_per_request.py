"""CPU per request, per process and thread, around one perf_analyzer run (docs/profile.md, fifth pass).

    .venv/bin/python scripts/bench_lib/cpu_per_request.py batching     # serve_double.py, dynamic batching, c=16
    .venv/bin/python scripts/bench_lib/cpu_per_request.py spin2        # pytriton serve sched_models:spin, 2 workers, c=4
    .venv/bin/python scripts/bench_lib/cpu_per_request.py double2      # the same with sched_models:double
    .venv/bin/python scripts/bench_lib/cpu_per_request.py sequence     # sched_models:accumulate, Direct sequence
                                                                       # batcher (START/READY/CORRID), c=8
    .venv/bin/python scripts/bench_lib/cpu_per_request.py seqdyn       # the same callable with the dynamic batcher
    .venv/bin/python scripts/bench_lib/cpu_per_request.py large --shared-memory system [--protocol http]
                                                 # serve_double.py's double_16mib, dynamic batching, c=2 (issue 21)
    .venv/bin/python scripts/bench_lib/cpu_per_request.py repo [--concurrency 8] [--checkout ../main]
                                                 # `pytriton serve --model-repository` on --vs-triton's repository
                                                 # (repo_double.py: double_small, a Triton Python-backend model.py,
                                                 # dynamic batching 100 us), c=1 by default (issue 37, eleventh pass)

`spinN` / `doubleN` serve N worker processes without a batcher (the scheduling suite's CPU row). The server is
started from this checkout's .venv, warmed up with one perf_analyzer run, then measured over a second one: user +
system CPU of every process of its tree (and of each busy thread) divided by the inference count the server's
statistics report for that run, with voluntary / involuntary context switches per request, perf_analyzer's own
CPU per request (its rusage) and the batch sizes the model ran (statistics `batch_stats`). `--checkout DIR` runs the server of another checkout
(its .venv and sources; this checkout's perf_analyzer), for an A/B of two branches with the same harness. With `--profile DIR`
every process of the server's tree runs under cProfile for the measured run only (switched on and off by SIGUSR1 /
SIGUSR2 through `profhook/sitecustomize.py`), its stats written to DIR. On a shared machine
throughput is noisy; CPU per request much less so (though other load still inflates it: compare alternating runs).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench_lib import procfs  # noqa: E402
from bench_lib.servers import REPO, free_port, stop_process, wait_model_ready  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def _threads(pid: int) -> dict[int, tuple[str, int, int, int, int]]:
    """tid -> (name, utime, stime, voluntary, involuntary context switches, minor page faults)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            text = open(f"/proc/{pid}/task/{tid}/stat").read()
            status = open(f"/proc/{pid}/task/{tid}/status").read()
        except OSError:
            continue
        fields = procfs.parse_stat(text)
        switches = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
                    if line.endswith("ctxt_switches") or "ctxt_switches:" in line}
        out[int(tid)] = (text[text.index("(") + 1:text.rindex(")")], int(fields[11]), int(fields[12]),
                         switches.get("voluntary_ctxt_switches", 0), switches.get("nonvoluntary_ctxt_switches", 0),
                         int(fields[7]))
    return out


def _role(pid: int) -> str:
    line = procfs.cmdline(pid)
    for marker, role in (("serve_double.py", "user process"), ("-m pytriton.server ", "server"), ("pytriton.cli", "server"),
                         ("pytriton.backends.worker", "worker")):
        if marker in line:
            return role
    return line[:40]


def _model_stats(port: int, model: str) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/stats", timeout=5) as answer:
        return json.loads(answer.read())["model_stats"]


def _stats(port: int, model: str) -> tuple[int, int]:
    stats = _model_stats(port, model)
    return sum(int(s["inference_count"]) for s in stats), sum(int(s["execution_count"]) for s in stats)


def _phases(port: int, model: str) -> dict[str, int]:
    """Nanoseconds so far in the statistics' compute_input / compute_infer / compute_output (the worker's phases)."""
    out: dict[str, int] = {}
    for s in _model_stats(port, model):
        for phase in ("compute_input", "compute_infer", "compute_output"):
            out[phase] = out.get(phase, 0) + int(s["inference_stats"][phase]["ns"])
    return out


def _batches(port: int, model: str) -> dict[int, int]:
    """batch size -> executions so far (statistics `batch_stats`)."""
    out: dict[int, int] = {}
    for s in _model_stats(port, model):
        for b in s.get("batch_stats", []):
            out[int(b["batch_size"])] = out.get(int(b["batch_size"]), 0) + int(b["compute_infer"]["count"])
    return out


SEQ_FLAGS = ["--sequence-batching", "direct", "--sequence-control", "start=START", "--sequence-control",
             "ready=READY", "--sequence-control", "corrid=CORRID"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", help="batching | large | repo | spinN | doubleN | sequence | seqdyn")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--shared-memory", default="none", help="perf_analyzer --shared-memory (none | system)")
    parser.add_argument("--protocol", default="grpc", help="perf_analyzer -i (grpc | http)")
    parser.add_argument("--interval", type=int, default=3000, help="perf_analyzer --measurement-interval (ms)")
    parser.add_argument("--perf-analyzer", default=str(REPO / ".tools" / "bin" / "perf_analyzer"))
    parser.add_argument("--profile", type=pathlib.Path, help="cProfile the measured run; stats go to this folder")
    parser.add_argument("--gc", type=pathlib.Path, help="time the garbage collector over the measured run (no cProfile);"
                        " its counts go to this folder")
    parser.add_argument("--checkout", type=pathlib.Path, default=REPO,
                        help="the checkout whose .venv and sources run the server (default: this one)")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    python = str(checkout / ".venv" / "bin" / "python")
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    ports = ["--http-port", str(http), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics)]
    scratch: pathlib.Path | None = None  # (the repo case's generated repository)
    if args.case == "batching":
        model, concurrency = "double_small", args.concurrency or 16
        cmd = [python, str(HERE / "serve_double.py"), *ports, "--batching", "dynamic", "--models", model]
    elif args.case == "large":
        model, concurrency = "double_16mib", args.concurrency or 2
        cmd = [python, str(HERE / "serve_double.py"), *ports, "--batching", "dynamic", "--models", model]
    elif args.case == "repo":
        from bench_lib.repo_double import write_repository  # noqa: PLC0415

        model, concurrency = "double_small", args.concurrency or 1
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="cpu-per-request-"))
        repository = write_repository(scratch / "repo", [model], "dynamic", delay_us=100)
        cmd = [python, "-m", "pytriton.cli", "serve", "--model-repository", str(repository), *ports]
    elif args.case in ("sequence", "seqdyn"):
        model, concurrency = "acc", args.concurrency or 8
        cmd = [python, "-m", "pytriton.cli", "serve", f"{HERE / 'sched_models.py'}:accumulate", "--model-name", model,
               "--input", "INPUT:fp32:16", "--output", "OUTPUT:fp32:16", "--max-batch-size", "8", *ports,
               *(SEQ_FLAGS if args.case == "sequence" else ["--dynamic-batching"])]
    else:
        fn, instances = args.case.rstrip("0123456789"), args.case[len(args.case.rstrip("0123456789")):] or "1"
        model, concurrency = fn, args.concurrency or 4
        cmd = [python, "-m", "pytriton.cli", "serve", f"{HERE / 'sched_models.py'}:{fn}", "--model-name", model,
               "--input", "INPUT:fp32:16", "--output", "OUTPUT:fp32:16", "--max-batch-size", "8", *ports,
               "--no-dynamic-batching", "--instances", instances]
    env = dict(os.environ)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE / "profhook"), env.get("PYTHONPATH")]))
        env["PROFHOOK_DIR"] = str(args.profile.resolve())
    elif args.gc:
        args.gc.mkdir(parents=True, exist_ok=True)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE / "profhook"), env.get("PYTHONPATH")]))
        env["PROFHOOK_GC"] = str(args.gc.resolve())
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=str(checkout), start_new_session=True, env=env)
    try:
        wait_model_ready(http, model)
        url = f"127.0.0.1:{grpc_port if args.protocol == 'grpc' else http}"
        pa = [args.perf_analyzer, "-m", model, "-i", args.protocol, "-u", url, "--shared-memory", args.shared_memory,
              "--concurrency-range", str(concurrency), "-b", "1", "--max-trials", "3", "--stability-percentage", "50",
              "--input-data", "zero"]
        subprocess.run([*pa, "--measurement-interval", "1000"], capture_output=True, check=False)  # warm-up
        pids = procfs.descendants(server.pid)
        before = {pid: _threads(pid) for pid in pids}
        count0, executions0 = _stats(http, model)
        batches0 = _batches(http, model)
        phases0 = _phases(http, model)
        if args.profile or args.gc:
            for pid in pids:
                os.kill(pid, signal.SIGUSR1)
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        run = subprocess.run([*pa, "--measurement-interval", str(args.interval)], capture_output=True, text=True,
                             check=False)
        elapsed = time.monotonic() - started
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        after = {pid: _threads(pid) for pid in pids}
        count1, executions1 = _stats(http, model)
        batches1 = _batches(http, model)
        phases1 = _phases(http, model)
        if args.profile or args.gc:
            for pid in pids:
                os.kill(pid, signal.SIGUSR2)
        requests = max(count1 - count0, 1)
        scale = 1e6 / procfs.CLK_TCK / requests
        print(f"{args.case}, c={concurrency}: {requests} requests in {elapsed:.1f} s, "
              f"{requests / max(executions1 - executions0, 1):.2f} per execution; load average {procfs.loadavg():.2f}")
        for line in run.stdout.splitlines():
            if "Throughput" in line:
                print("  perf_analyzer", line.strip())
        sizes = {size: batches1.get(size, 0) - batches0.get(size, 0) for size in sorted(batches1)}
        print("  executions by batch size:", ", ".join(f"{size}: {n}" for size, n in sizes.items() if n))
        print("  worker wall time per request (statistics): " + ", ".join(
            f"{phase} {(phases1[phase] - phases0[phase]) / 1000 / requests:.0f} us" for phase in phases1))
        pa_user = (children1.ru_utime - children0.ru_utime) * 1e6 / requests
        pa_sys = (children1.ru_stime - children0.ru_stime) * 1e6 / requests
        print(f"  {'perf_analyzer':<13} {'':11} {pa_user:6.0f} user + {pa_sys:5.0f} sys us/request")
        for pid in pids:
            rows = []
            total = [0, 0, 0, 0, 0]
            for tid, (name, user, system, vol, invol, minflt) in after[pid].items():
                old = before[pid].get(tid, (name, 0, 0, 0, 0, 0))
                delta = [user - old[1], system - old[2], vol - old[3], invol - old[4], minflt - old[5]]
                total = [a + b for a, b in zip(total, delta)]
                if delta[0] + delta[1]:
                    rows.append((delta[0] + delta[1], name, delta))
            print(f"  {_role(pid):<13} pid {pid:<7} {total[0] * scale:6.0f} user + {total[1] * scale:5.0f} sys us/request;"
                  f" context switches per request {total[2] / requests:.2f} voluntary, {total[3] / requests:.2f} not;"
                  f" minor faults per request {total[4] / requests:.1f}")
            for _, name, delta in sorted(rows, reverse=True)[:4]:
                print(f"      thread {name:<14} {delta[0] * scale:6.0f} + {delta[1] * scale:5.0f}")
    finally:
        stop_process(server)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
