"""Triton's public Python-backend examples, run unchanged against ``pytriton serve --model-repository``.

Run through ``scripts/triton-examples PATH [EXAMPLE ...]``; PATH is a python_backend checkout (or its
``examples`` folder). Nothing of the examples is kept in this repository: each example's models are copied from
PATH into a temporary model repository at run time, laid out as its README says, and its own client scripts run
unchanged with this interpreter (they need ``tritonclient``, ``numpy``, and ``requests`` for custom_metrics).

Standard library only, so that it runs from any venv that has pytriton installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}  # what the examples' clients connect to


@dataclasses.dataclass(frozen=True)
class Example:
    """One example: the models its README lays out (repository name -> (model file, config file or None))."""

    name: str
    models: dict[str, tuple[str, str | None]]
    clients: tuple[str, ...]
    note: str = ""
    needs: tuple[str, ...] = ()  # modules the server's interpreter must import (else the example is skipped)


_ADD_SUB = {"add_sub": ("add_sub/model.py", "add_sub/config.pbtxt")}
_PYTORCH = {"pytorch": ("pytorch/model.py", "pytorch/config.pbtxt")}
_SQUARE = {"square_int32": ("decoupled/square_model.py", "decoupled/square_config.pbtxt")}

# Layouts as in the READMEs: python_backend/README.md (add_sub), examples/*/README.md.
EXAMPLES = [
    Example("add_sub", dict(_ADD_SUB), ("add_sub/client.py",)),
    Example("pytorch", dict(_PYTORCH), ("pytorch/client.py",), "needs torch", ("torch",)),
    Example("decoupled", {"repeat_int32": ("decoupled/repeat_model.py", "decoupled/repeat_config.pbtxt"), **_SQUARE},
            ("decoupled/repeat_client.py", "decoupled/square_client.py")),
    Example("bls_sync", {**_ADD_SUB, "bls_sync": ("bls/sync_model.py", "bls/sync_config.pbtxt"), **_PYTORCH},
            ("bls/sync_client.py",), "calls the pytorch model", ("torch",)),
    Example("bls_async", {**_ADD_SUB, "bls_async": ("bls/async_model.py", "bls/async_config.pbtxt"), **_PYTORCH},
            ("bls/async_client.py",), "calls the pytorch model", ("torch",)),
    Example("bls_decoupled_sync", {"bls_decoupled_sync": ("bls_decoupled/sync_model.py",
                                                          "bls_decoupled/sync_config.pbtxt"), **_SQUARE},
            ("bls_decoupled/sync_client.py",)),
    Example("bls_decoupled_async", {"bls_decoupled_async": ("bls_decoupled/async_model.py",
                                                            "bls_decoupled/async_config.pbtxt"), **_SQUARE},
            ("bls_decoupled/async_client.py",)),
    Example("auto_complete", {"nobatch_auto_complete": ("auto_complete/nobatch_model.py", None),
                              "batch_auto_complete": ("auto_complete/batch_model.py", None)},
            ("auto_complete/client.py",), "no config.pbtxt: the models complete their own configuration"),
    Example("custom_metrics", {"custom_metrics": ("custom_metrics/model.py", "custom_metrics/config.pbtxt")},
            ("custom_metrics/client.py",), "reads the metrics port 8002"),
]
BY_NAME = {e.name: e for e in EXAMPLES}


@dataclasses.dataclass
class Outcome:
    example: str
    status: str = "PASS"  # PASS | FAIL | SKIP
    detail: list[str] = dataclasses.field(default_factory=list)

    def fail(self, why: str) -> None:
        self.status = "FAIL"
        self.detail.append(why)


def log(msg: str) -> None:
    print(f"[triton-examples] {msg}", file=sys.stderr, flush=True)


def find_examples_dir(path: pathlib.Path) -> pathlib.Path:
    for cand in (path, path / "examples"):
        if (cand / "add_sub" / "model.py").is_file():
            return cand
    raise SystemExit(f"{path}: neither a python_backend checkout nor its examples folder (no add_sub/model.py)")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def choose_ports() -> tuple[dict[str, int], bool]:
    """The examples' own ports when all are free; otherwise free ports, and the clients must be patched."""
    if all(port_free(p) for p in PORTS.values()):
        return dict(PORTS), False
    ports: dict[str, int] = {}
    while len(set(ports.values())) < len(PORTS):
        ports = {k: free_port() for k in PORTS}
    return ports, True


def layout(example: Example, src: pathlib.Path, repo: pathlib.Path) -> None:
    """models/<name>/config.pbtxt and models/<name>/1/model.py, as the README's `cp` lines do."""
    for model, (model_file, config_file) in example.models.items():
        (repo / model / "1").mkdir(parents=True, exist_ok=True)
        shutil.copy(src / model_file, repo / model / "1" / "model.py")
        if config_file is not None:
            shutil.copy(src / config_file, repo / model / "config.pbtxt")


def descendants(pid: int) -> set[int]:
    """pid and its living descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in out and os.path.exists(f"/proc/{p}"):
            out.add(p)
            todo.extend(children.get(p, []))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shm_of(pids: set[int]) -> list[str]:
    """Files in /dev/shm whose names carry one of these pids (pytriton names segments ..._<owner pid>_...)."""
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    pat = re.compile(r"_(\d+)_")
    return sorted(n for n in names if any(int(m) in pids for m in pat.findall(n)))


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError):
        return 0


class ServerRun:
    """One `pytriton serve --model-repository` process and the processes it started."""

    def __init__(self, repo: pathlib.Path, ports: dict[str, int], logfile: pathlib.Path, python: str) -> None:
        self.ports, self.logfile = ports, logfile
        self.cmd = [python, "-m", "pytriton.cli", "serve", "--model-repository", str(repo),
                    "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]),
                    "--metrics-port", str(ports["metrics"])]
        self.proc: subprocess.Popen[bytes] | None = None
        self.tree: set[int] = set()

    def start(self, timeout_s: float) -> str | None:
        """None when ready; else why not."""
        with open(self.logfile, "wb") as logf:
            self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"server exited with status {self.proc.returncode} before it was ready"
            if http_status(f"http://127.0.0.1:{self.ports['http']}/v2/health/ready") == 200:
                self.watch()
                return None
            time.sleep(0.1)
        return f"server not ready within {timeout_s:.0f} s"

    def watch(self) -> None:
        if self.proc is not None:
            self.tree |= descendants(self.proc.pid)

    def stop(self, grace_s: float) -> list[str]:
        """SIGINT to the server's PID; problems seen (a process left, a file left in /dev/shm)."""
        problems: list[str] = []
        if self.proc is None:
            return problems
        self.watch()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                problems.append(f"server still running {grace_s:.0f} s after SIGINT: killed")
                self.proc.kill()
                self.proc.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in self.tree - {self.proc.pid}) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in sorted(p for p in self.tree - {self.proc.pid} if alive(p)):
            problems.append(f"process {pid} outlived the server: killed")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for name in shm_of(self.tree):
            problems.append(f"/dev/shm/{name} left behind: removed")
            try:
                os.unlink(f"/dev/shm/{name}")
            except OSError:
                pass
        return problems


def patched_client(client: pathlib.Path, ports: dict[str, int], work: pathlib.Path) -> pathlib.Path:
    """A copy of the client with the examples' fixed ports replaced (only when 8000-8002 are taken)."""
    text = client.read_text()
    for key, default in PORTS.items():
        text = text.replace(f"localhost:{default}", f"localhost:{ports[key]}")
    out = work / "patched" / client.parent.name / client.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def tail(path: pathlib.Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_example(example: Example, src: pathlib.Path, work: pathlib.Path, args: argparse.Namespace) -> Outcome:
    out = Outcome(example.name)
    missing = [m for m in example.needs
               if subprocess.run([args.python, "-c", f"import {m}"], capture_output=True, check=False).returncode]
    if missing:
        out.status = "SKIP"
        out.detail.append(f"{', '.join(missing)} cannot be imported by {args.python}")
        return out
    repo = work / example.name / "models"
    layout(example, src, repo)
    ports, patched = choose_ports()
    if patched:
        out.detail.append(f"ports 8000-8002 taken: clients run with patched URLs {ports}")
    server = ServerRun(repo, ports, work / example.name / "server.log", args.python)
    log(f"{example.name}: serving {', '.join(example.models)} on {ports}")
    try:
        why = server.start(args.startup_timeout)
        if why is not None:
            out.fail(why)
            out.detail.append("server log: " + tail(server.logfile, args.log_lines))
            return out
        for rel in example.clients:
            client = src / rel
            script = patched_client(client, ports, work) if patched else client
            t0 = time.monotonic()
            try:
                res = subprocess.run([args.python, str(script)], capture_output=True, text=True,
                                     timeout=args.client_timeout, cwd=work / example.name, check=False)
                rc, output = res.returncode, res.stdout + res.stderr
            except subprocess.TimeoutExpired as e:
                rc, output = -1, f"timed out after {args.client_timeout} s\n{e.stdout or ''}{e.stderr or ''}"
            server.watch()
            log(f"{example.name}: {rel} exited with {rc} after {time.monotonic() - t0:.1f} s")
            if args.verbose or rc != 0:
                sys.stderr.write(output if output.endswith("\n") else output + "\n")
            if rc != 0:
                last = [line for line in output.splitlines() if line.strip()][-3:]
                out.fail(f"{rel}: exit status {rc}: " + " | ".join(last))
    finally:
        for problem in server.stop(args.grace):
            out.fail(problem)
    if out.status == "FAIL":
        out.detail.append("server log: " + tail(server.logfile, args.log_lines))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/triton-examples", description=(__doc__ or "").splitlines()[0])
    p.add_argument("path", type=pathlib.Path, help="a python_backend checkout, or its examples folder")
    p.add_argument("examples", nargs="*", help="which ones (default: all): " + ", ".join(BY_NAME))
    p.add_argument("--python", default=sys.executable, help="interpreter for the server and the clients")
    p.add_argument("--startup-timeout", type=float, default=90.0)
    p.add_argument("--client-timeout", type=float, default=120.0)
    p.add_argument("--grace", type=float, default=40.0, help="seconds the server may take to stop")
    p.add_argument("--log-lines", type=int, default=15, help="server log lines shown for a failure")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (repositories, server logs)")
    p.add_argument("-v", "--verbose", action="store_true", help="show the clients' output")
    args = p.parse_args(argv)
    src = find_examples_dir(args.path.resolve())
    unknown = [e for e in args.examples if e not in BY_NAME]
    if unknown:
        p.error(f"unknown example(s) {unknown}; known: {', '.join(BY_NAME)}")
    chosen = [BY_NAME[e] for e in args.examples] if args.examples else EXAMPLES
    work = pathlib.Path(tempfile.mkdtemp(prefix="triton-examples-"))
    outcomes: list[Outcome] = []
    try:
        for example in chosen:
            outcomes.append(run_example(example, src, work, args))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    width = max(len(o.example) for o in outcomes)
    print(f"\n{'example':<{width}}  result  notes")
    for o in outcomes:
        first, *rest = o.detail or [BY_NAME[o.example].note]
        print(f"{o.example:<{width}}  {o.status:<6}  {first}")
        for line in rest:
            for sub in line.splitlines():
                print(f"{'':<{width}}          {sub}")
    passed = sum(o.status == "PASS" for o in outcomes)
    failed = sum(o.status == "FAIL" for o in outcomes)
    print(f"\n{passed}/{len(outcomes)} passed, {failed} failed, {len(outcomes) - passed - failed} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
