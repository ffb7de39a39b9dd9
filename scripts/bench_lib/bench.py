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
import csv
import dataclasses
import datetime as dt
import json
import os
import pathlib
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

REPO = pathlib.Path(__file__).resolve().parents[2]
SERVE_SCRIPT = pathlib.Path(__file__).resolve().parent / "serve_double.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

SIZES = {"small": ("double_small", 16), "1mib": ("double_1mib", 262144)}
SIZE_LABEL = {"small": "16 floats", "1mib": "1 MiB"}
SERVER_LABEL = {"ours": "pytriton (ours)", "nvidia": "NVIDIA PyTriton"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- cases ---
@dataclasses.dataclass(frozen=True)
class Case:
    protocol: str  # grpc | http
    size: str  # small | 1mib
    shm: str  # none | system
    batching: str = "off"  # off | dynamic

    @property
    def model(self) -> str:
        return SIZES[self.size][0]

    @property
    def key(self) -> str:
        return f"{self.protocol}-{self.size}-{self.shm}" + ("-batched" if self.batching != "off" else "")

    @property
    def label(self) -> str:
        shm = "system shm" if self.shm == "system" else "no shm"
        batched = ", dynamic batching" if self.batching != "off" else ""
        return f"{'gRPC' if self.protocol == 'grpc' else 'HTTP'}, {SIZE_LABEL[self.size]}, {shm}{batched}"


def full_matrix() -> list[Case]:
    return [Case(p, s, m) for s in ("small", "1mib") for p in ("grpc", "http") for m in ("none", "system")]


def quick_matrix() -> list[Case]:
    return [Case("grpc", "small", "none"), Case("http", "small", "none"), Case("grpc", "1mib", "none"),
            Case("http", "1mib", "system")]


BATCHED_CASES = [Case("grpc", "small", "none", "dynamic"), Case("http", "small", "none", "dynamic")]


# ------------------------------------------------------------------------------------ process tree ---
def _stat(pid: int) -> list[str] | None:
    try:
        raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces/parentheses: split after the last ')'
    rest = raw[raw.rindex(")") + 2:].split()
    return rest  # rest[0] = state (field 3), rest[1] = ppid (field 4), ...


def descendants(root: int) -> list[int]:
    """root and all its descendants (by scanning /proc for parent pids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is None:
            continue
        children.setdefault(int(st[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid != root and _stat(pid) is None:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def start_time(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[19]) if st else None  # field 22


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        st = _stat(pid)
        if st:
            total += int(st[11]) + int(st[12])  # utime, stime (fields 14, 15)
    return total / CLK_TCK


def memory_kib(pids: list[int]) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) in KiB over pids."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss, pss


def shm_files(pids: list[int]) -> set:
    """/dev/shm files that the processes have mapped or open."""
    found = set()
    for pid in pids:
        try:
            for line in pathlib.Path(f"/proc/{pid}/maps").read_text().splitlines():
                i = line.find("/dev/shm/")
                if i >= 0:
                    found.add(line[i:].replace(" (deleted)", ""))
        except OSError:
            pass
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("/dev/shm/"):
                    found.add(target.replace(" (deleted)", ""))
        except OSError:
            pass
    return found


def _cpu_jiffies() -> list[int]:
    parts = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return [int(x) for x in parts[:8]]


def busy_jiffies() -> int:
    """CPU time processes of this machine used: all but idle, iowait and steal."""
    vals = _cpu_jiffies()
    return sum(vals) - vals[3] - vals[4] - vals[7]


def steal_jiffies() -> int:
    """CPU time the hypervisor gave to other virtual machines while ours wanted it."""
    return _cpu_jiffies()[7]


def loadavg() -> float:
    return float(pathlib.Path("/proc/loadavg").read_text().split()[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError, ConnectionError):
        return 0, b""


# ----------------------------------------------------------------------------------------- servers ---
@dataclasses.dataclass
class ServerSpec:
    name: str  # ours | nvidia
    python: pathlib.Path
    env: dict[str, str]


class Server:
    """One launch of serve_double.py under a given venv."""

    def __init__(self, spec: ServerSpec, batching: str, models: list[str], logfile: pathlib.Path, cwd: pathlib.Path):
        self.spec, self.batching, self.models, self.logfile = spec, batching, models, logfile
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        while len({self.http_port, self.grpc_port, self.metrics_port}) < 3:
            self.grpc_port, self.metrics_port = free_port(), free_port()
        self.cwd = cwd
        # A TMPDIR of its own: whatever the server leaves in it after stopping is certainly its own.
        self.tmpdir = pathlib.Path(tempfile.mkdtemp(prefix="ptb-"))
        self.workspaces: set = set()  # NVIDIA PyTriton's workspace (under ~/.cache/pytriton), from command lines
        self.proc: subprocess.Popen | None = None
        self.tree: dict[int, int | None] = {}  # pid -> start time
        self.shm_seen: set = set()
        self.startup_s: float | None = None
        self.problems: list[str] = []

    def cmd(self) -> list[str]:
        return [str(self.spec.python), str(SERVE_SCRIPT), "--http-port", str(self.http_port),
                "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                "--batching", self.batching, "--models", ",".join(self.models)]

    def start(self, timeout_s: float) -> bool:
        self._log = open(self.logfile, "wb")  # noqa: SIM115 (open for the server's lifetime, closed in stop())
        t0 = time.perf_counter()
        # New session: a Ctrl-C in the terminal reaches only the bench, whose handler stops the server.
        env = dict(self.spec.env, TMPDIR=str(self.tmpdir))
        self.proc = subprocess.Popen(self.cmd(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, cwd=self.cwd, start_new_session=True)
        pending = list(self.models)
        while pending and time.perf_counter() - t0 < timeout_s:
            if self.proc.poll() is not None:
                break
            status, _ = http_get(f"http://127.0.0.1:{self.http_port}/v2/models/{pending[0]}/ready", timeout=0.5)
            if status == 200:
                pending.pop(0)
                continue
            time.sleep(0.02)
        if pending:
            self.problems.append(f"{self.spec.name}: not ready within {timeout_s:.0f} s "
                                 f"(exit status {self.proc.poll()}); log {self.logfile}")
            return False
        self.startup_s = time.perf_counter() - t0
        self.refresh_tree()
        return True

    def refresh_tree(self) -> list[int]:
        if self.proc is None:
            return []
        pids = descendants(self.proc.pid)
        for pid in pids:
            if pid not in self.tree:
                self.tree[pid] = start_time(pid)
                try:
                    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    cmdline = ""
                self.workspaces.update(re.findall(r"(/\S*/pytriton/workspace_[^/\s]+)", cmdline))
        self.shm_seen |= shm_files(pids)
        return pids

    def alive_tree(self) -> list[int]:
        return [pid for pid, st in self.tree.items() if st is not None and start_time(pid) == st]

    def server_version(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.http_port}/v2")
        if status == 200:
            try:
                meta = json.loads(body)
                return f"{meta.get('name', '?')} {meta.get('version', '?')}"
            except ValueError:
                pass
        return "?"

    def inference_count(self, model: str) -> int | None:
        status, body = http_get(f"http://127.0.0.1:{self.http_port}/v2/models/{model}/stats", timeout=5)
        if status != 200:
            return None
        try:
            stats = json.loads(body)["model_stats"]
            return sum(int(s.get("inference_count", 0)) for s in stats)
        except (ValueError, KeyError, TypeError):
            return None

    def stop(self, grace_s: float = 45.0) -> None:
        if self.proc is None:
            return
        self.refresh_tree()
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.problems.append(f"{self.spec.name}: still running {grace_s:.0f} s after SIGINT; SIGKILL")
                proc.kill()
                proc.wait()
        if proc.returncode not in (0, -signal.SIGINT):
            self.problems.append(f"{self.spec.name}: server script exited with status {proc.returncode}")
        # Its other processes should follow within a few seconds; kill leftovers by pid (start time checked).
        deadline = time.time() + 10
        while self.alive_tree() and time.time() < deadline:
            time.sleep(0.1)
        for pid in self.alive_tree():
            self.problems.append(f"{self.spec.name}: process {pid} outlived the server; killed")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        left = sorted(f for f in self.shm_seen if os.path.exists(f))
        for f in left:
            self.problems.append(f"{self.spec.name}: {f} left in /dev/shm; removed")
            try:
                os.unlink(f)
            except OSError:
                pass
        left = sorted(str(p.relative_to(self.tmpdir)) for p in self.tmpdir.rglob("*"))
        if left:
            self.problems.append(f"{self.spec.name}: left in its TMPDIR: {', '.join(left[:8])}"
                                 + (f" (+{len(left) - 8} more)" if len(left) > 8 else "") + "; removed")
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        for ws in sorted(self.workspaces):
            if os.path.exists(ws):
                self.problems.append(f"{self.spec.name}: workspace {ws} left behind; removed")
                shutil.rmtree(ws, ignore_errors=True)
        self._log.close()


# ----------------------------------------------------------------------------------- perf_analyzer ---
def parse_pa_text(text: str) -> dict[int, dict[str, Any]]:
    """Per concurrency: client request count, server inference/execution count."""
    out: dict[int, dict[str, Any]] = {}
    cur = side = None
    for line in text.splitlines():
        m = re.match(r"Request concurrency: (\d+)", line)
        if m:
            cur, side = int(m.group(1)), None
            out[cur] = {}
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("Client:"):
            side = "client"
        elif s.startswith("Server:"):
            side = "server"
        elif side == "client" and s.startswith("Request count:"):
            out[cur]["client_count"] = int(s.split()[2])
        elif side == "server" and s.startswith("Inference count:"):
            out[cur]["server_count"] = int(s.split()[2])
        elif side == "server" and s.startswith("Execution count:"):
            out[cur]["server_executions"] = int(s.split()[2])
    return out


class MemorySampler:
    """Peak RSS/PSS of a server's process tree, sampled every 0.5 s in a thread until stop()."""

    def __init__(self, server: Server) -> None:
        self.server, self.rss, self.pss = server, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            rss, pss = memory_kib(self.server.refresh_tree())
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_perf_analyzer(args, server: Server, case: Case, concurrency: str, outdir: pathlib.Path, tag: str,
                      problems: list[str]) -> dict[int, dict[str, Any]]:
    """One perf_analyzer run (retried once when it cannot stabilise); results per concurrency."""
    port = server.grpc_port if case.protocol == "grpc" else server.http_port
    results: dict[int, dict[str, Any]] = {}
    wanted = sorted({int(c) for c in _expand_range(concurrency)})
    for attempt in (1, 2):
        csv_path = outdir / f"{tag}.{attempt}.csv"
        txt_path = outdir / f"{tag}.{attempt}.txt"
        cmd = [str(args.perf_analyzer), "-m", case.model, "-i", case.protocol, "-u", f"127.0.0.1:{port}",
               "--shared-memory", case.shm, "--concurrency-range", concurrency, "-b", "1",
               "--measurement-interval", str(args.interval), "--max-trials", str(args.max_trials),
               "--stability-percentage", str(args.stability), "--input-data", "zero", "-f", str(csv_path)]
        if attempt == 1:
            log("  " + " ".join(c.replace(str(REPO) + "/", "") for c in cmd))
        model_count0 = server.inference_count(case.model)
        pids = server.refresh_tree()
        cpu0, busy0, steal0, load0 = cpu_seconds(pids), busy_jiffies(), steal_jiffies(), loadavg()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        sampler = MemorySampler(server)
        timed_out = False
        with open(txt_path, "wb") as out:
            pa = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                rc = pa.wait(args.pa_timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                pa.kill()
                rc = pa.wait()
            except BaseException:  # interrupted: do not leave perf_analyzer behind
                pa.kill()
                pa.wait()
                sampler.stop()
                raise
        wall = time.perf_counter() - t0
        sampler.stop()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        pids = server.refresh_tree()
        server_cpu = cpu_seconds(pids) - cpu0
        pa_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        total_cpu = (busy_jiffies() - busy0) / CLK_TCK
        steal = (steal_jiffies() - steal0) / CLK_TCK
        model_count1 = server.inference_count(case.model)
        text = txt_path.read_text(errors="replace")
        unstable = "Failed to obtain stable measurement" in text
        rows = _read_csv(csv_path)
        counts = parse_pa_text(text)
        errors = [ln.strip() for ln in text.splitlines()
                  if re.search(r"error|failed|exception|abort", ln, re.IGNORECASE) and "stable measurement" not in ln]
        if timed_out:
            problems.append(f"{tag}: perf_analyzer killed after {args.pa_timeout} s ({txt_path})")
        elif rc not in (0,) and not (unstable and rc == 2):
            problems.append(f"{tag}: perf_analyzer exited {rc} ({txt_path}): {' | '.join(errors[:3])}")
        elif errors:
            problems.append(f"{tag}: perf_analyzer printed errors ({txt_path}): {' | '.join(errors[:3])}")
        requests = None
        if model_count0 is not None and model_count1 is not None:
            requests = model_count1 - model_count0
        for row in rows:
            c = int(row["Concurrency"])
            if c in results:
                continue
            cnt = counts.get(c, {})
            # perf_analyzer reads the server's statistics around its measurement window with HTTP calls of its own,
            # so the two counts differ by the requests in flight at the edges and those completed while a statistics
            # call was on its way: about c each side, and ~1 % at thousands of requests per second.
            if ("client_count" in cnt and "server_count" in cnt
                    and abs(cnt["client_count"] - cnt["server_count"]) > max(2 * c + 2, cnt["client_count"] // 100)):
                    problems.append(f"{tag} c={c}: server inference count {cnt['server_count']} "
                                    f"!= client request count {cnt['client_count']}")
            results[c] = {
                "throughput": float(row["Inferences/Second"]),
                "p50_us": float(row["p50 latency"]),
                "p90_us": float(row["p90 latency"]),
                "p99_us": float(row["p99 latency"]),
                "counts": cnt,
                "attempt": attempt,
            }
        # Whole-run figures (all concurrencies of this run together).
        run_info = {
            "wall_s": wall, "server_cpu_s": server_cpu, "pa_cpu_s": pa_cpu, "total_cpu_s": total_cpu,
            "other_cpu_s": max(0.0, total_cpu - server_cpu - pa_cpu), "steal_s": steal,
            "load_start": load0, "load_end": loadavg(),
            "requests": requests, "peak_rss_kib": sampler.rss, "peak_pss_kib": sampler.pss, "rc": rc,
            "unstable": unstable,
        }
        if requests:
            run_info["server_cpu_us_per_request"] = server_cpu / requests * 1e6
        for res in results.values():
            res.setdefault("run", run_info)
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


def _expand_range(spec: str) -> list[int]:
    parts = [int(x) for x in spec.split(":")]
    if len(parts) == 1:
        return parts
    start, end = parts[0], parts[1]
    step = parts[2] if len(parts) > 2 else 1
    return list(range(start, end + 1, step))


def _read_csv(path: pathlib.Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("Concurrency", "").isdigit()]


# ---------------------------------------------------------------------------------------- the run ---
def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def run(args) -> dict[str, Any]:
    outdir = args.out_dir
    outdir.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GLIBC_TUNABLES", "LD_PRELOAD")}
    nv_env = dict(base_env)
    nv_env["LD_LIBRARY_PATH"] = args.nvidia_libdir + (":" + base_env["LD_LIBRARY_PATH"]
                                                      if base_env.get("LD_LIBRARY_PATH") else "")
    specs = {"ours": ServerSpec("ours", args.ours_python, base_env),
             "nvidia": ServerSpec("nvidia", args.nvidia_python, nv_env)}
    servers = [s for s in ("ours", "nvidia") if s in args.servers]
    cases = quick_matrix() if args.quick else full_matrix()
    batched = [] if (args.quick or args.no_batching) else BATCHED_CASES
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c.key for c in full_matrix() + BATCHED_CASES}
        if unknown:
            raise SystemExit(f"unknown case(s): {sorted(unknown)}")
        cases = [c for c in full_matrix() if c.key in wanted]
        batched = [c for c in BATCHED_CASES if c.key in wanted]
    concurrency = args.concurrency

    problems: list[str] = []
    samples: dict[str, dict[str, Any]] = {s: {"startup_s": [], "rss_ready_kib": [], "pss_ready_kib": [],
                                              "peak_rss_kib": [], "cases": {}} for s in servers}
    versions: dict[str, str] = {}
    t_start = time.time()

    current: list[Server] = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt

    # SIGINT explicitly too: started in the background by a non-interactive shell, it arrives ignored.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for rep in range(args.repeats):
            order = servers if rep % 2 == 0 else list(reversed(servers))
            for name in order:
                # ---- main launch: both models, no dynamic batching
                tag = f"r{rep + 1}-{name}"
                server = Server(specs[name], "off", [SIZES[s][0] for s in ("small", "1mib")],
                                outdir / f"{tag}-server.log", outdir)
                current.append(server)
                log(f"repeat {rep + 1}/{args.repeats}: {SERVER_LABEL[name]}: starting")
                if not server.start(args.startup_timeout):
                    server.stop()
                    current.remove(server)
                    problems.extend(server.problems)
                    continue
                time.sleep(args.settle)
                rss, pss = memory_kib(server.refresh_tree())
                smp = samples[name]
                smp["startup_s"].append(server.startup_s)
                smp["rss_ready_kib"].append(rss)
                smp["pss_ready_kib"].append(pss)
                smp["processes"] = len(server.alive_tree())
                versions.setdefault(name, server.server_version())
                log(f"  ready after {server.startup_s:.2f} s; {len(server.alive_tree())} processes, "
                    f"RSS {rss / 1024:.0f} MiB, PSS {pss / 1024:.0f} MiB")
                peak = 0
                for case in cases:
                    res = run_perf_analyzer(args, server, case, concurrency, outdir, f"{tag}-{case.key}", problems)
                    for c, r in res.items():
                        r["repeat"] = rep + 1
                        smp["cases"].setdefault(case.key, {}).setdefault(str(c), []).append(r)
                        peak = max(peak, r["run"]["peak_rss_kib"])
                    _log_results(case, res)
                smp["peak_rss_kib"].append(peak)
                server.stop()
                current.remove(server)
                problems.extend(server.problems)
                _scan_log(server, problems)
                # ---- batching launch: one model, PyTriton's default DynamicBatcher (delay 0)
                if batched:
                    tag = f"r{rep + 1}-{name}-batched"
                    server = Server(specs[name], "dynamic", ["double_small"], outdir / f"{tag}-server.log", outdir)
                    current.append(server)
                    log(f"repeat {rep + 1}/{args.repeats}: {SERVER_LABEL[name]} with dynamic batching: starting")
                    if server.start(args.startup_timeout):
                        time.sleep(args.settle)
                        for case in batched:
                            res = run_perf_analyzer(args, server, case, args.batched_concurrency, outdir,
                                                    f"{tag}-{case.key}", problems)
                            for c, r in res.items():
                                r["repeat"] = rep + 1
                                smp["cases"].setdefault(case.key, {}).setdefault(str(c), []).append(r)
                            _log_results(case, res)
                    server.stop()
                    current.remove(server)
                    problems.extend(server.problems)
                    _scan_log(server, problems)
    except KeyboardInterrupt:
        log("interrupted: stopping the server")
        for server in current:
            server.stop()
            for p in server.problems:
                log(f"  {p}")
        raise
    return {
        "samples": samples, "versions": versions, "problems": problems, "cases": [c.key for c in cases + batched],
        "case_labels": {c.key: c.label for c in cases + batched}, "elapsed_s": time.time() - t_start,
        "settings": {"repeats": args.repeats, "quick": args.quick, "concurrency": concurrency,
                     "batched_concurrency": args.batched_concurrency, "interval_ms": args.interval,
                     "max_trials": args.max_trials, "stability": args.stability},
    }


def _log_results(case: Case, res: dict[int, dict[str, Any]]) -> None:
    for c in sorted(res):
        r = res[c]
        cpu = r["run"].get("server_cpu_us_per_request")
        log(f"    {case.key:<22} c={c:<2} {r['throughput']:9.1f}/s  p50 {r['p50_us'] / 1000:7.2f} ms  "
            f"p99 {r['p99_us'] / 1000:7.2f} ms" + (f"  server CPU {cpu:6.0f} us/req" if cpu else "")
            + f"  (other load {r['run']['other_cpu_s'] / max(r['run']['wall_s'], 1e-9):.2f} cores, "
            f"stolen {r['run'].get('steal_s', 0.0) / max(r['run']['wall_s'], 1e-9):.2f})")


# Triton (NVIDIA PyTriton) on a machine without a GPU, harmless: logged at every start / model load.
BENIGN_LOG_LINES = (
    "Failed to set config modification time",
    "CudaDriverHelper has not been initialized",
)


def _scan_log(server: Server, problems: list[str]) -> None:
    try:
        text = server.logfile.read_text(errors="replace")
    except OSError:
        return
    m = re.search(r"^BENCH pytriton package: (.*)$", text, re.MULTILINE)
    expected = REPO / "pytriton" if server.spec.name == "ours" else server.spec.python.parent.parent
    if not m:
        problems.append(f"{server.spec.name}: the model script did not report its pytriton package ({server.logfile})")
    elif not pathlib.Path(m.group(1)).resolve().is_relative_to(expected.resolve()):
        problems.append(f"{server.spec.name}: imported pytriton from {m.group(1)}, expected under {expected}")
    bad = []
    for line in text.splitlines():
        if any(benign in line for benign in BENIGN_LOG_LINES):
            continue
        if re.search(r"Traceback|\bERROR\b|CRITICAL|^E\d{4} ", line):
            bad.append(line.strip())
    if bad:
        problems.append(f"{server.spec.name}: {len(bad)} error line(s) in {server.logfile}: {bad[0][:300]}")


# ------------------------------------------------------------------------------------------ report ---
def aggregate(result: dict[str, Any]) -> dict[str, Any]:
    agg: dict[str, Any] = {}
    for name, smp in result["samples"].items():
        a = {k: median(smp[k]) for k in ("startup_s", "rss_ready_kib", "pss_ready_kib", "peak_rss_kib")}
        a["n_launches"] = len(smp["startup_s"])
        a["processes"] = smp.get("processes")
        a["cases"] = {}
        for key, per_c in smp["cases"].items():
            for c, runs in per_c.items():
                a["cases"][f"{key}@{c}"] = {
                    "throughput": median([r["throughput"] for r in runs]),
                    "throughput_min": min(r["throughput"] for r in runs),
                    "throughput_max": max(r["throughput"] for r in runs),
                    "p50_us": median([r["p50_us"] for r in runs]),
                    "p99_us": median([r["p99_us"] for r in runs]),
                    "cpu_us": median([r["run"].get("server_cpu_us_per_request") for r in runs]),
                    "other_cores": median([r["run"]["other_cpu_s"] / r["run"]["wall_s"] for r in runs]),
                    "steal_cores": median([_stolen(r) for r in runs]),
                    # repeat -> (throughput, CPU stolen); runs of old results carry no repeat: their order is it
                    "per_repeat": {str(r.get("repeat", i + 1)): (r["throughput"], _stolen(r))
                                   for i, r in enumerate(runs)},
                    "n": len(runs),
                }
        agg[name] = a
    return agg


def case_rows(keys: list[str], ours: dict[str, Any], nv: dict[str, Any]) -> Iterator[tuple[str, int, dict, dict]]:
    """(case key, concurrency, our aggregate, NVIDIA's aggregate) for every case and concurrency measured."""
    for key in keys:
        concs = {int(k.split("@")[1]) for a in (ours, nv) for k in a.get("cases", {}) if k.split("@")[0] == key}
        for c in sorted(concs):
            yield key, c, ours.get("cases", {}).get(f"{key}@{c}", {}), nv.get("cases", {}).get(f"{key}@{c}", {})


def _stolen(r: dict[str, Any]) -> float | None:
    """CPU time the hypervisor took from this machine during a run, in cores."""
    run = r["run"]
    return run["steal_s"] / run["wall_s"] if "steal_s" in run and run["wall_s"] else None


UNEVEN_STEAL = 0.15  # cores: a pair of runs whose stolen CPU differs by more is not an even comparison


def evenness(o: dict[str, Any], n: dict[str, Any]) -> tuple[list[str], float | None, str | None]:
    """Per-repeat ratios with the CPU stolen on each side, the ratio of the repeat whose two runs lost the
    most similar CPU to the hypervisor, and that repeat."""
    cells, best, best_gap, best_rep = [], None, None, None
    for rep in sorted(set(o.get("per_repeat", {})) & set(n.get("per_repeat", {})), key=int):
        (ot, os_), (nt, ns) = o["per_repeat"][rep], n["per_repeat"][rep]
        r = ratio(ot, nt)
        steal = "" if os_ is None or ns is None else f" ({os_:.2f}/{ns:.2f})"
        cells.append(f"r{rep} {fmt_ratio(r)}{steal}")
        if os_ is not None and ns is not None and r is not None:
            gap = abs(os_ - ns)
            if best_gap is None or gap < best_gap:
                best, best_gap, best_rep = r, gap, rep
    return cells, best, best_rep


TARGETS = {  # ratio ours / NVIDIA
    "thr_small": (">=", 2.0), "thr_1mib_none": (">=", 2.0), "thr_1mib_system": (">=", 4.0),
    "p50_c1": ("<=", 0.5), "startup": ("<=", 0.3), "rss": ("<=", 0.5),
}


def thr_target(key: str) -> tuple[str, float]:
    if "-small-" in key + "-":
        return TARGETS["thr_small"]
    return TARGETS["thr_1mib_system"] if key.endswith("-system") else TARGETS["thr_1mib_none"]


def fmt_ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def check(r: float | None, target: tuple[str, float]) -> str:
    if r is None:
        return "–"
    op, v = target
    ok = r >= v if op == ">=" else r <= v
    return ("✅" if ok else "❌") + f" {op.replace('>=', '≥').replace('<=', '≤')} {v:g}×"


def fmt_num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def machine_info() -> dict[str, str]:
    cpu = "?"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        mem_kib = int(pathlib.Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cpus": str(os.cpu_count()), "memory": f"{mem_kib / 1024 / 1024:.0f} GiB",
            "kernel": platform.release(), "python": platform.python_version()}


def pkg_version(python: pathlib.Path, dist: str) -> str:
    try:
        out = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                             capture_output=True, text=True, timeout=30, check=False)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def git_describe() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "pytriton"],
                               capture_output=True, text=True, check=False).stdout.strip()
        return rev + (" + uncommitted changes under pytriton/" if dirty else "")
    except OSError:
        return "?"


def write_report(args, result: dict[str, Any], agg: dict[str, Any], meta: dict[str, Any]) -> str:
    ours, nv = agg.get("ours", {}), agg.get("nvidia", {})
    keys = result["cases"]
    labels = result["case_labels"]
    lines: list[str] = []
    w = lines.append
    s = result["settings"]
    w("# Benchmarks: pytriton vs NVIDIA PyTriton")
    w("")
    w(f"Generated by `scripts/bench{' --quick' if s['quick'] else ''}` on {meta['date']} "
      f"({result['elapsed_s'] / 60:.1f} min). Do not edit by hand: rerun `scripts/bench` "
      "(about 13-18 min; `scripts/bench --quick`: about 2-3 min, 1 repeat, 4 cases).")
    w("")
    w("Both servers serve the same file, `scripts/bench_lib/serve_double.py` (the PyTriton API: `Triton`, "
      "`bind`, `@batch`, y = 2x, FP32, `max_batch_size=64`, one instance), each from its own venv, one after "
      "the other. Ratios are **pytriton / NVIDIA PyTriton**: above 1 is better for throughput, below 1 is "
      "better for latency, start-up and memory.")
    w("")
    w("![throughput and ratios](benchmarks.png)")
    w("")
    w("## Setup")
    w("")
    w(f"- Machine: {meta['machine']['cpu']}, {meta['machine']['cpus']} CPUs, {meta['machine']['memory']} RAM, "
      f"Linux {meta['machine']['kernel']}; perf_analyzer runs on the same CPUs as the server. Load average "
      f"at the start {meta['load_start']:.2f}, at the end {meta['load_end']:.2f}; median CPU used by other "
      f"processes during the perf_analyzer runs: {meta['other_cores']:.2f} cores"
      + (f"; median CPU time stolen by the hypervisor (other virtual machines on the host): "
         f"{meta['steal_cores']:.2f} of {meta['machine']['cpus']} CPUs" if meta.get("steal_cores") is not None else
         " (steal time included)")
      + " (shared machine: read every figure as ±25 % or worse).")
    w(f"- pytriton (ours): {meta['ours_version']}, commit {meta['git']}, Python {meta['machine']['python']}, "
      f"its `GET /v2` says `{result['versions'].get('ours', '?')}` (Triton-compatible metadata).")
    w(f"- NVIDIA PyTriton: nvidia-pytriton {meta['nvidia_version']} (venv `.bench/nvidia-pytriton`), `GET /v2` "
      f"says `{result['versions'].get('nvidia', '?')}` (Triton C++ server + Python backend).")
    w(f"- perf_analyzer {meta['pa_version']} (`scripts/install-perf-analyzer`): `-b 1 --concurrency-range "
      f"{s['concurrency']} --measurement-interval {s['interval_ms']} --max-trials {s['max_trials']} "
      f"--stability-percentage {s['stability']} --input-data zero`, `-i grpc|http`, "
      "`--shared-memory none|system` (with system shm perf_analyzer registers regions and no tensor bytes "
      "travel on the socket). A run that cannot stabilise is retried once.")
    w(f"- {s['repeats']} repeat(s): each repeat starts each server once (order alternating), measures it and "
      "stops it; every figure is the **median over the repeats**.")
    w("- Dynamic batching is **off** in both for the matrix: `ModelConfig(batching=True, max_batch_size=64, "
      "batcher=None)` (NVIDIA PyTriton then writes no `dynamic_batching` block; ours has no batcher), so "
      "each request is executed on its own. The batching rows use PyTriton's default "
      "`DynamicBatcher()` (max_queue_delay_microseconds=0) in both, in a separate launch serving "
      "`double_small` only.")
    w("- Shared-memory registration is behind an access token by default in both servers; "
      "the model script passes `TritonSecurityConfig(restricted_endpoints=[])` so perf_analyzer can register.")
    w("- Start-up to ready: from launching `python serve_double.py` until `GET /v2/models/NAME/ready` "
      "answers 200 for both models. Memory: sum over the server's process tree (the user script and every "
      "descendant: for NVIDIA `tritonserver`, the Python-backend stubs and their helpers; for ours the "
      "server process and any workers) of RSS from `/proc/PID/smaps_rollup`, 1 s after ready; PSS (shared "
      "pages divided among the processes) alongside. The server process environment is the caller's "
      "without `GLIBC_TUNABLES` (ours sets its malloc tunables itself).")
    w("- Server CPU per request: CPU time of the whole server process tree during one perf_analyzer run "
      "divided by the server's inference count over the run (statistics API), both concurrencies together.")
    w("")
    w("## Throughput and median latency (batch 1)")
    w("")
    w("| case | conc. | ours (infer/s) | NVIDIA (infer/s) | ratio | target | ours p50 (ms) | NVIDIA p50 (ms) "
      "| p50 ratio | target |")
    w("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |")
    ratios_for_plot = []
    for key, c, o, n in case_rows(keys, ours, nv):
        tr = ratio(o.get("throughput"), n.get("throughput"))
        lr = ratio(o.get("p50_us"), n.get("p50_us"))
        tt = thr_target(key) if "batched" not in key else None
        lt = TARGETS["p50_c1"] if c == 1 and "batched" not in key else None
        w(f"| {labels[key]} | {c} | {fmt_num(o.get('throughput'))} | {fmt_num(n.get('throughput'))} | "
          f"{fmt_ratio(tr)} | {check(tr, tt) if tt else ''} | "
          f"{fmt_num(o.get('p50_us') and o['p50_us'] / 1000, 2)} | "
          f"{fmt_num(n.get('p50_us') and n['p50_us'] / 1000, 2)} | {fmt_ratio(lr)} | "
          f"{check(lr, lt) if lt else ''} |")
        ratios_for_plot.append((key, c, tr))
    w("")
    w("How to read it: the machine is shared and small, so absolute figures are low and vary between runs "
      "(min–max in the last table; the setup line gives the CPU other processes used meanwhile). NVIDIA "
      "PyTriton's request path crosses four processes (tritonserver → Python-backend stub → its proxy → the "
      "user's process); its server CPU per request below shows what that costs here. For scale, the team's "
      "reference measurements of NVIDIA PyTriton 0.7.0 on the same kind of machine (another day, setup not "
      "recorded in detail) gave gRPC 16 floats 530–550/s at c=1 and 1,440–1,740/s at c=8, and 3.4–3.8 s "
      "start-up: a quiet machine may narrow the ratios. The servers are measured one after the other: when the "
      "hypervisor took more CPU from one side's runs than from the other's, the median ratio leans towards the "
      "side that lost less; \"How even was the comparison?\" below lists each repeat with the CPU stolen on "
      "both sides and the ratio of the evenest pair.")
    w("")
    w("## Start-up and memory")
    w("")
    w("| | ours | NVIDIA | ratio | target |")
    w("| --- | ---: | ---: | ---: | --- |")
    r = ratio(ours.get("startup_s"), nv.get("startup_s"))
    w(f"| start-up to ready (s) | {fmt_num(ours.get('startup_s'), 2)} | {fmt_num(nv.get('startup_s'), 2)} | "
      f"{fmt_ratio(r)} | {check(r, TARGETS['startup'])} |")
    r = ratio(ours.get("rss_ready_kib"), nv.get("rss_ready_kib"))
    w(f"| RSS after ready, process tree (MiB) | {fmt_num(_mib(ours.get('rss_ready_kib')))} | "
      f"{fmt_num(_mib(nv.get('rss_ready_kib')))} | {fmt_ratio(r)} | {check(r, TARGETS['rss'])} |")
    r = ratio(ours.get("pss_ready_kib"), nv.get("pss_ready_kib"))
    w(f"| PSS after ready, process tree (MiB) | {fmt_num(_mib(ours.get('pss_ready_kib')))} | "
      f"{fmt_num(_mib(nv.get('pss_ready_kib')))} | {fmt_ratio(r)} | |")
    r = ratio(ours.get("peak_rss_kib"), nv.get("peak_rss_kib"))
    w(f"| peak RSS under load, process tree (MiB) | {fmt_num(_mib(ours.get('peak_rss_kib')))} | "
      f"{fmt_num(_mib(nv.get('peak_rss_kib')))} | {fmt_ratio(r)} | |")
    w(f"| processes in the tree | {ours.get('processes', '–')} | {nv.get('processes', '–')} | | |")
    w("")
    w("## Tail latency and server CPU per request")
    w("")
    w("| case | conc. | ours p99 (ms) | NVIDIA p99 (ms) | ours server CPU (µs/req) | NVIDIA server CPU (µs/req) "
      "| ours throughput min–max | NVIDIA throughput min–max | CPU stolen, ours / NVIDIA (cores) |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, c, o, n in case_rows(keys, ours, nv):
        w(f"| {labels[key]} | {c} | {fmt_num(o.get('p99_us') and o['p99_us'] / 1000, 2)} | "
          f"{fmt_num(n.get('p99_us') and n['p99_us'] / 1000, 2)} | {fmt_num(o.get('cpu_us'))} | "
          f"{fmt_num(n.get('cpu_us'))} | {_range(o)} | {_range(n)} | "
          f"{fmt_num(o.get('steal_cores'), 2)} / {fmt_num(n.get('steal_cores'), 2)} |")
    w("")
    w("Server CPU per request covers both concurrencies of a run (one figure per run, repeated on its rows). "
      "CPU stolen: the median share of the 2 CPUs the hypervisor gave to other virtual machines during the "
      "runs of that case.")
    w("")
    write_evenness(w, keys, labels, ours, nv)
    w("## Problems seen in this run")
    w("")
    if result["problems"]:
        for p in result["problems"]:
            w(f"- {p}")
    else:
        w("None: every perf_analyzer run exited cleanly with server counts matching client counts, no "
          "error lines in the server logs, every server process gone after SIGINT, nothing left in /dev/shm.")
    w("")
    w("## Reproduce")
    w("")
    w("```")
    w("scripts/bench                 # full matrix, 3 repeats, writes docs/benchmarks.md and docs/benchmarks.png")
    w("scripts/bench --quick         # 1 repeat, 4 cases, no batching launch")
    w("scripts/bench --help          # repeats, cases, perf_analyzer knobs, output paths")
    w("```")
    w("")
    w(f"Logs, perf_analyzer output/CSVs and `results.json` of this run: `{meta['out_dir_rel']}` (git-ignored).")
    w("")
    return "\n".join(lines)


def write_evenness(w: Callable[[str], None], keys: list[str], labels: dict[str, str], ours: dict[str, Any],
                   nv: dict[str, Any]) -> None:
    """Per-repeat ratios next to the CPU each side lost to the hypervisor: the servers are measured one after
    the other, so a burst of steal can land on one side only and bias a median ratio."""
    rows, uneven, total = [], 0, 0
    for key, c, o, n in case_rows(keys, ours, nv):
        cells, best, rep = evenness(o, n)
        if not cells:
            continue
        total += 1
        os_, ns = o.get("steal_cores"), n.get("steal_cores")
        flag = os_ is not None and ns is not None and abs(os_ - ns) > UNEVEN_STEAL
        uneven += flag
        target = thr_target(key) if "batched" not in key else None
        rows.append(f"| {labels[key]} | {c} | {' · '.join(cells)} | {'uneven' if flag else ''} | "
                    f"{fmt_ratio(best)} (r{rep}) | {check(best, target) if target and best else ''} |")
    if not rows:
        return
    w("## How even was the comparison?")
    w("")
    w("The two servers are measured one after the other, so the hypervisor can take CPU time from one side's "
      "runs and not the other's. Each repeat's throughput ratio is listed with the CPU stolen during each "
      "side's run (ours/NVIDIA, cores); *uneven* marks a case whose median stolen CPU differs by more than "
      f"{UNEVEN_STEAL:.2f} cores between the sides ({uneven} of {total} here). The last columns take the repeat "
      "whose two runs lost the most similar CPU: the fairest single pair.")
    w("")
    w("| case | conc. | ratio per repeat (stolen ours/NVIDIA) | | evenest repeat | target |")
    w("| --- | ---: | --- | --- | ---: | --- |")
    for row in rows:
        w(row)
    w("")


def _mib(kib: float | None) -> float | None:
    return None if kib is None else kib / 1024


def _range(a: dict[str, Any]) -> str:
    if not a:
        return "–"
    return f"{a['throughput_min']:,.0f}–{a['throughput_max']:,.0f} (n={a['n']})"


def plot(path: pathlib.Path, result: dict[str, Any], agg: dict[str, Any], meta: dict[str, Any]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        log("matplotlib not available: no plot")
        return False
    ours, nv = agg.get("ours", {}), agg.get("nvidia", {})
    rows = []
    for key, c, o, n in case_rows(result["cases"], ours, nv):
        lab = result["case_labels"][key].replace(", ", "\n").replace("dynamic batching", "batched")
        rows.append((f"{lab}\nc={c}", o.get("throughput"), n.get("throughput"), key, c))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(10, 0.75 * len(rows) + 3), 10),
                                   gridspec_kw={"height_ratios": [3, 2]})
    xs = list(range(len(rows)))
    width = 0.4
    ax1.bar([x - width / 2 for x in xs], [r[1] or 0 for r in rows], width, label=SERVER_LABEL["ours"],
            color="#2a7ab9")
    ax1.bar([x + width / 2 for x in xs], [r[2] or 0 for r in rows], width, label=SERVER_LABEL["nvidia"],
            color="#76b900")
    ax1.set_yscale("log")
    ax1.set_ylabel("throughput (infer/s, log scale)")
    ax1.set_xticks(xs)
    ax1.set_xticklabels([r[0] for r in rows], fontsize=7)
    ax1.legend()
    ax1.set_title(f"perf_analyzer, batch 1, median of {result['settings']['repeats']} "
                  f"({meta['date']}, {meta['machine']['cpus']} CPUs, shared)", fontsize=10)
    ax1.grid(axis="y", alpha=0.3)
    # Ratio panel: throughput ratios per case, then p50 c=1, start-up, RSS.
    items = []  # (label, ratio, target value, higher is better)
    for lab, o, n, key, c in rows:
        tgt = thr_target(key)[1] if "batched" not in key else None
        items.append(("throughput " + lab.replace("\n", " "), ratio(o, n), tgt, True))
    for key in result["cases"]:
        o = ours.get("cases", {}).get(f"{key}@1", {}).get("p50_us")
        n = nv.get("cases", {}).get(f"{key}@1", {}).get("p50_us")
        if o and n and "batched" not in key:
            items.append((f"p50 c=1 {result['case_labels'][key]}", o / n, 0.5, False))
    items.append(("start-up to ready", ratio(ours.get("startup_s"), nv.get("startup_s")), 0.3, False))
    items.append(("RSS after ready", ratio(ours.get("rss_ready_kib"), nv.get("rss_ready_kib")), 0.5, False))
    ys = list(range(len(items)))
    colors = []
    for _, r, t, hib in items:
        if r is None or t is None:
            colors.append("#999999")
        else:
            colors.append("#2a9d3a" if (r >= t if hib else r <= t) else "#d1495b")
    # Bars start at 1 (parity): right of it ours is ahead on throughput, left of it on the other metrics.
    ax2.barh(ys, [(i[1] or 1.0) - 1.0 for i in items], left=1.0, color=colors)
    for y, (_, r, t, _hib) in zip(ys, items):
        if t is not None:
            ax2.plot([t, t], [y - 0.4, y + 0.4], color="black", lw=1.5)
        if r is not None:
            ax2.text(r, y, f" {r:.2f}×", va="center", fontsize=6)
    ax2.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax2.set_xscale("log")
    lo = min([0.2] + [i[1] for i in items if i[1]]) * 0.8
    hi = max([5.0] + [i[1] for i in items if i[1]]) * 1.3
    ax2.set_xlim(lo, hi)
    ticks = [t for t in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3, 4, 6, 10, 20, 50) if lo <= t <= hi]
    ax2.set_xticks(ticks)
    ax2.set_xticklabels([f"{t:g}×" for t in ticks])
    ax2.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax2.set_yticks(ys)
    ax2.set_yticklabels([i[0] for i in items], fontsize=6)
    ax2.invert_yaxis()
    ax2.set_xlabel("ours / NVIDIA (log scale); black tick = target; green = target met")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def print_summary(result: dict[str, Any], agg: dict[str, Any]) -> None:
    ours, nv = agg.get("ours", {}), agg.get("nvidia", {})
    print()
    print(f"{'case':<40} {'c':>2} {'ours/s':>9} {'NVIDIA/s':>9} {'thr ratio':>9} {'p50 ratio':>9}")
    for key, c, o, n in case_rows(result["cases"], ours, nv):
        print(f"{result['case_labels'][key]:<40} {c:>2} {fmt_num(o.get('throughput')):>9} "
              f"{fmt_num(n.get('throughput')):>9} {fmt_ratio(ratio(o.get('throughput'), n.get('throughput'))):>9} "
              f"{fmt_ratio(ratio(o.get('p50_us'), n.get('p50_us'))):>9}")
    print(f"{'start-up to ready (s)':<40}    {fmt_num(ours.get('startup_s'), 2):>9} {fmt_num(nv.get('startup_s'), 2):>9} "
          f"{fmt_ratio(ratio(ours.get('startup_s'), nv.get('startup_s'))):>9}")
    print(f"{'RSS after ready (MiB)':<40}    {fmt_num(_mib(ours.get('rss_ready_kib'))):>9} "
          f"{fmt_num(_mib(nv.get('rss_ready_kib'))):>9} "
          f"{fmt_ratio(ratio(ours.get('rss_ready_kib'), nv.get('rss_ready_kib'))):>9}")
    if result["problems"]:
        print(f"\n{len(result['problems'])} problem(s):")
        for p in result["problems"]:
            print(f"  - {p}")
    print()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 repeat, 4 cases, no batching launch (~2-3 min)")
    p.add_argument("--repeats", type=int, help="launches per server (default 3; 1 with --quick)")
    p.add_argument("--cases", help="comma-separated case keys, e.g. grpc-small-none,http-1mib-system "
                   "(grpc|http)-(small|1mib)-(none|system)[-batched]")
    p.add_argument("--servers", default="ours,nvidia", help="comma-separated subset of ours,nvidia")
    p.add_argument("--no-batching", action="store_true", help="skip the dynamic-batching launches")
    p.add_argument("--concurrency", default="1:8:7", help="perf_analyzer --concurrency-range (default 1:8:7)")
    p.add_argument("--batched-concurrency", default="8", help="concurrency for the batching cases (default 8)")
    p.add_argument("--interval", type=int, default=1500, help="perf_analyzer --measurement-interval ms (1500)")
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
    p.add_argument("--nvidia-python", type=pathlib.Path, default=REPO / ".bench" / "nvidia-pytriton" / "bin" / "python")
    p.add_argument("--perf-analyzer", type=pathlib.Path, default=REPO / ".tools" / "bin" / "perf_analyzer")
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    args.servers = [s for s in args.servers.split(",") if s]
    now = dt.datetime.now(dt.timezone.utc)
    if args.out_dir is None:
        args.out_dir = REPO / ".bench" / "results" / now.strftime("%Y%m%dT%H%M%SZ")
    args.out_dir = args.out_dir.resolve()
    libdir = subprocess.run([str(args.nvidia_python), "-c",
                             "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
                            capture_output=True, text=True, check=False).stdout.strip()
    args.nvidia_libdir = libdir

    if args.from_results:
        data = json.loads(args.from_results.read_text())
        result, meta = data["result"], data["meta"]
        agg = aggregate(result)
        print_summary(result, agg)
        if not args.no_doc:
            write_outputs(args, result, agg, meta)
        return 1 if result["problems"] else 0

    load_start = loadavg()
    log(f"output folder: {args.out_dir}")
    try:
        result = run(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    agg = aggregate(result)
    all_runs = [r for smp in result["samples"].values() for per_c in smp["cases"].values() for runs in per_c.values()
                for r in runs]
    other = [r["run"]["other_cpu_s"] / r["run"]["wall_s"] for r in all_runs]
    stolen = [r["run"]["steal_s"] / r["run"]["wall_s"] for r in all_runs if "steal_s" in r["run"]]
    try:
        rel = args.out_dir.relative_to(REPO)
    except ValueError:
        rel = args.out_dir
    pa_stamp = REPO / ".tools" / "perf_analyzer" / ".installed"
    pa_version = "?"
    if pa_stamp.exists():
        m = re.search(r"tritonclient==(\S+)", pa_stamp.read_text())
        pa_version = m.group(1) if m else "?"
    meta = {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_info(), "load_start": load_start,
        "load_end": loadavg(), "other_cores": median(other) or 0.0,
        "steal_cores": median(stolen) if stolen else None, "git": git_describe(),
        "ours_version": "pytriton " + pkg_version(args.ours_python, "pytriton"),
        "nvidia_version": pkg_version(args.nvidia_python, "nvidia-pytriton"), "pa_version": pa_version,
        "out_dir_rel": str(rel),
    }
    (args.out_dir / "results.json").write_text(json.dumps({"result": result, "aggregate": agg, "meta": meta},
                                                          indent=1, default=str))
    print_summary(result, agg)
    if not args.no_doc:
        write_outputs(args, result, agg, meta)
    return 1 if result["problems"] else 0


def write_outputs(args, result: dict[str, Any], agg: dict[str, Any], meta: dict[str, Any]) -> None:
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(write_report(args, result, agg, meta))
    log(f"wrote {args.doc}")
    if plot(args.plot, result, agg, meta):
        log(f"wrote {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
