"""``scripts/bench --streaming``: streamed OpenAI completions, ours beside Triton's OpenAI frontend (issue 36).

One generated model repository holds ``stream_llm`` (stream_model.py: decoupled, vLLM tensor convention, `max_tokens`
pieces of a few characters, no sleep), with ``--instances`` Python-backend instances. Two servers serve it:

- **ours**: ``pytriton serve --model-repository R --openai-port 0``;
- **Triton**: Triton's OpenAI frontend (``python/openai/openai_frontend/main.py`` of v2.52.0, unchanged) in the venv
  .bench/triton-openai, over pytriton's in-process API (``import tritonserver``), ``--backend vllm`` with a word-level
  tokenizer made here (nothing is downloaded).

Both are started, then for each stream count the load generator (sse_load.py, a process of its own, the same for
both) runs against each server in turn, the order alternating from one count to the next, so that both see the
same background load as nearly as a shared machine allows. Every figure comes from one run of ``--duration``
seconds per server and count. Beside them: the client's CPU (getrusage) and the server process tree's (/proc).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from typing import NoReturn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench_lib import procfs  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODEL = "stream_llm"
FRONTEND = pathlib.Path("python", "openai", "openai_frontend", "main.py")
SERVERS = ("ours", "triton")
LABEL = {"ours": "pytriton --openai-port", "triton": "Triton's OpenAI frontend"}
READY_LINE = "pytriton server ready"
PORT_RE = re.compile(r"Started OpenAIService at [^:]+:(\d+)")
UVICORN_RE = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
PID_RE = re.compile(r"started \(pid (\d+)\)")
CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true }},
  {{ name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}
]
output [ {{ name: "text_output" data_type: TYPE_STRING dims: [ -1 ] }} ]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""
TOKENIZER = """
import json, pathlib, sys
from tokenizers import Tokenizer, models, pre_tokenizers
folder = pathlib.Path(sys.argv[1])
tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
folder.mkdir(parents=True, exist_ok=True)
tokenizer.save(str(folder / "tokenizer.json"))
(folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
    "unk_token": "[UNK]", "chat_template": "{% for m in messages %}{{ m['content'] }}\\n{% endfor %}"}))
"""


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def write_repository(root: pathlib.Path, instances: int) -> pathlib.Path:
    if root.exists():
        shutil.rmtree(root)
    (root / MODEL / "1").mkdir(parents=True)
    shutil.copy(HERE / "stream_model.py", root / MODEL / "1" / "model.py")
    (root / MODEL / "config.pbtxt").write_text(CONFIG.format(name=MODEL, instances=instances))
    return root


class Launched:
    """One server process, its log read in a thread; its OpenAI port once it listens."""

    def __init__(self, name: str, cmd: list[str], cwd: pathlib.Path, logfile: pathlib.Path, port_re: re.Pattern[str],
                 ready_line: str | None, timeout_s: float) -> None:
        self.name, self.logfile = name, logfile
        env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        self.process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self.pids: set[int] = {self.process.pid}
        self.shm: set[str] = set()
        self.port: int | None = None
        self._port_re, self._ready_line = port_re, ready_line
        self._ready = threading.Event()
        self._seen_ready = ready_line is None
        self._out = logfile.open("w")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout_s) or self.port is None:
            self.stop()
            raise RuntimeError(f"{name} did not become ready within {timeout_s:g} s; see {logfile}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._out.write(line)
            self._out.flush()
            match = self._port_re.search(line)
            if match:
                self.port = int(match.group(1))
            for pid in PID_RE.findall(line):
                self.pids.add(int(pid))
            if self._ready_line is not None and self._ready_line in line:
                self._seen_ready = True
            if self.port is not None and self._seen_ready:
                self._ready.set()
        self._ready.set()

    def tree(self) -> list[int]:
        """The process and its descendants now (each also remembered for the leftover check)."""
        pids = [self.process.pid, *procfs.descendants(self.process.pid)]
        self.pids.update(pids)
        return pids

    def stop(self) -> int:
        """Stop it (SIGINT, then SIGKILL after 60 s); its exit status."""
        self.tree()
        self.shm |= procfs.shm_files(sorted(self.pids))
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(10)
        self._out.close()
        return self.process.returncode

    def leftovers(self) -> list[str]:
        """Processes of its tree still alive, /dev/shm files it had that still exist (after stop)."""
        found = []
        for pid in sorted(self.pids - {self.process.pid}):
            st = procfs.stat(pid)
            if st is not None and st[2] != "Z":
                found.append(f"{self.name}: process {pid} ({procfs.cmdline(pid)[:80]}) still running")
        found += [f"{self.name}: {path} still exists" for path in sorted(self.shm) if os.path.exists(path)]
        return found


def start_ours(args: argparse.Namespace, repository: pathlib.Path) -> Launched:
    ports = [a for s in ("grpc", "http", "metrics") for a in (f"--{s}-port", "0", f"--{s}-address", "127.0.0.1")]
    cmd = [str(args.ours_python), "-m", "pytriton.cli", "serve", "--model-repository", str(repository),
           "--openai-port", "0", "--openai-address", "127.0.0.1", *ports]
    return Launched("ours", cmd, REPO, args.out_dir / "ours-server.log", PORT_RE, READY_LINE, args.startup_timeout)


def start_triton(args: argparse.Namespace, repository: pathlib.Path, tokenizer: pathlib.Path) -> Launched:
    main = args.triton_openai_src / FRONTEND
    cmd = [str(args.triton_python), str(main), "--model-repository", str(repository), "--tokenizer", str(tokenizer),
           "--backend", "vllm", "--host", "127.0.0.1", "--openai-port", "0"]
    return Launched("triton", cmd, main.parent, args.out_dir / "triton-server.log", UVICORN_RE, None,
                    args.startup_timeout)


def check_answer(port: int, max_tokens: int) -> str | None:
    """One streamed completion read whole: None when its text is the model's, else what is wrong."""
    body = json.dumps({"model": MODEL, "prompt": "check", "max_tokens": max_tokens, "stream": True}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read().decode()
    except OSError as exc:
        return f"the check request failed: {exc}"
    events = [e.strip()[len("data: "):] for e in text.split("\n\n") if e.strip().startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        return f"the check stream did not end with [DONE]: {text[-200:]!r}"
    pieces = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1] if json.loads(e)["choices"])
    expected = "".join(f" t{i}" for i in range(max_tokens))
    if pieces != expected:
        return f"the check stream's text is {pieces[:80]!r}..., not {expected[:80]!r}..."
    return None


def run_load(args: argparse.Namespace, server: Launched, streams: int) -> dict:
    """sse_load.py against the server at `streams` streams; its figures with the server tree's CPU added."""
    assert server.port is not None
    cmd = [str(args.client_python), str(HERE / "sse_load.py"), "--port", str(server.port), "--model", MODEL,
           "--streams", str(streams), "--duration", str(args.duration), "--max-tokens", str(args.max_tokens)]
    pids = server.tree()
    cpu0, t0 = procfs.cpu_seconds(pids), time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 120)
    wall = time.monotonic() - t0
    cpu1 = procfs.cpu_seconds(server.tree())
    try:
        result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"streams": streams, "errors": [f"the client exited {done.returncode}: {done.stderr[-400:]}"],
                "error_count": 1}
    result["server_cores"] = (cpu1 - cpu0) / wall if wall else None
    result["load"] = procfs.loadavg()
    return result


def uptime() -> str:
    return " ".join((procfs.PROC / "loadavg").read_text().split()[:3])


class Streaming:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.samples: dict[str, dict] = {}  # "<server>/<streams>" -> figures
        self.problems: list[str] = []

    def _measure(self, servers: dict[str, Launched]) -> None:
        for i, streams in enumerate(self.args.streams):
            order = list(servers) if i % 2 == 0 else list(reversed(list(servers)))
            for name in order:
                r = run_load(self.args, servers[name], streams)
                self.samples[f"{name}/{streams}"] = r
                for e in r.get("errors", []):
                    self.problems.append(f"{name}, {streams} streams: {e}")
                if "tokens_per_s" in r:
                    log(f"  {name:<6} {streams:>4} streams: {r['tokens_per_s']:9.0f} tokens/s  TTFT p50 "
                        f"{_f(r['ttft_p50_ms'])} p99 {_f(r['ttft_p99_ms'])} ms  ITL p50 {_f(r['itl_p50_ms'], 3)} "
                        f"p99 {_f(r['itl_p99_ms'], 3)} ms  {r['requests']} requests  client {r['client_cores']:.2f} "
                        f"cores, server {r['server_cores']:.2f} cores")

    def run(self) -> dict:
        args = self.args
        t0, uptime_start = time.time(), uptime()
        repository = write_repository(args.out_dir / "repository", args.instances)
        servers: dict[str, Launched] = {}
        try:
            if "triton" in args.servers:
                tokenizer = args.out_dir / "tokenizer"
                subprocess.run([str(args.triton_python), "-c", TOKENIZER, str(tokenizer)], check=True)
            for name in args.servers:
                log(f"starting {LABEL[name]}")
                servers[name] = (start_ours(args, repository) if name == "ours"
                                 else start_triton(args, repository, tokenizer))
                port = servers[name].port
                assert port is not None
                wrong = check_answer(port, args.max_tokens)
                if wrong:
                    raise RuntimeError(f"{name}: {wrong}")
            self._measure(servers)
        finally:
            for name, server in servers.items():
                code = server.stop()
                if code not in (0, -signal.SIGINT):
                    self.problems.append(f"{name}: exited with {code} (see {server.logfile})")
            for server in servers.values():
                self.problems += server.leftovers()
        return {"suite": "streaming", "samples": self.samples, "problems": self.problems,
                "servers": list(args.servers), "streams": list(args.streams), "duration_s": args.duration,
                "max_tokens": args.max_tokens, "instances": args.instances, "elapsed_s": time.time() - t0,
                "uptime_start": uptime_start, "uptime_end": uptime(),
                "machine": dataclasses.asdict(procfs.machine_info()), "quick": args.quick,
                "triton_openai": str(args.triton_openai_src / FRONTEND), "triton_tag": tag_of(args.triton_openai_src)}


def tag_of(src: pathlib.Path) -> str:
    """The frontend's version as its checkout says (the `tag` file `scripts/bench` leaves), else the folder."""
    tag = src / "TAG"
    return tag.read_text().strip() if tag.is_file() else src.name


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/bench --streaming", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streaming", action="store_true", help="(the suite's switch in scripts/bench)")
    p.add_argument("--quick", action="store_true", help="1 and 16 streams, 3 s each")
    p.add_argument("--streams", help="comma-separated stream counts (default 1,16,64,256; 1,16 with --quick)")
    p.add_argument("--duration", type=float, help="seconds of load per server and count (10; 3 with --quick)")
    p.add_argument("--max-tokens", type=int, default=200, help="tokens (pieces) per completion (200)")
    p.add_argument("--instances", type=int, default=2, help="instances of the model on both servers (2)")
    p.add_argument("--servers", default="ours,triton", help="a subset of ours,triton (default both)")
    p.add_argument("--ours-python", type=pathlib.Path, default=REPO / ".venv" / "bin" / "python")
    p.add_argument("--client-python", type=pathlib.Path, default=pathlib.Path(sys.executable))
    p.add_argument("--triton-python", type=pathlib.Path, default=REPO / ".bench" / "triton-openai" / "bin" / "python",
                   help="the venv of Triton's frontend (made by scripts/bench)")
    p.add_argument("--triton-openai-src", type=pathlib.Path, default=REPO / ".bench" / "triton-server-src",
                   help="a checkout of triton-inference-server/server holding python/openai (made by scripts/bench)")
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--out-dir", type=pathlib.Path, help="logs and results.json (default .bench/results/<UTC time>)")
    p.add_argument("--triton-doc", type=pathlib.Path, default=REPO / "docs" / "benchmarks-triton.md")
    p.add_argument("--no-doc", action="store_true", help="leave docs/benchmarks-triton.md alone")
    p.add_argument("--from-results", type=pathlib.Path, metavar="RESULTS_JSON",
                   help="write the report from an earlier run's results.json instead of measuring")
    args = p.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    unknown = sorted(set(args.servers) - set(SERVERS))
    if unknown or not args.servers:
        p.error(f"--servers: {unknown or 'none'}: choose from {','.join(SERVERS)}")
    args.streams = [int(n) for n in (args.streams or ("1,16" if args.quick else "1,16,64,256")).split(",") if n]
    if args.duration is None:
        args.duration = 3.0 if args.quick else 10.0
    args.started = datetime.datetime.now(datetime.timezone.utc)
    if args.out_dir is None:
        args.out_dir = REPO / ".bench" / "results" / args.started.strftime("%Y%m%dT%H%M%SZ-streaming")
    return args


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from bench_lib import stream_report, triton_report

    args = parse(argv)
    if args.from_results:
        result = json.loads(args.from_results.read_text())
    else:
        if "triton" in args.servers and not (args.triton_openai_src / FRONTEND).is_file():
            log(f"no {FRONTEND} under {args.triton_openai_src} (scripts/bench --streaming makes it)")
            return 1
        args.out_dir.mkdir(parents=True, exist_ok=True)
        log(f"output folder: {args.out_dir}")
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            result = Streaming(args).run()
        except KeyboardInterrupt:
            log("interrupted")
            return 130
        except RuntimeError as exc:
            log(str(exc))
            return 1
        result["date"] = args.started.strftime("%Y-%m-%d %H:%M UTC")
        result["git"] = git_commit()
        (args.out_dir / "results.json").write_text(json.dumps(result, indent=1))
    print(stream_report.summary(result))
    if not args.no_doc:
        triton_report.write_section(args.triton_doc, "streaming", stream_report.markdown(result))
        log(f"wrote {args.triton_doc}")
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
