"""Triton's public sequence client examples (tritonclient's src/python/examples/simple_*_sequence_*), run unchanged
against ``pytriton serve`` serving tests/repositories/sequence/simple_sequence (a Python model computing what
Triton's example simple_sequence graph computes: OUTPUT = (INPUT + START) * READY).

Run through ``scripts/triton-client-examples PATH``; PATH is a checkout of github.com/triton-inference-server/client
(or its src/python/examples folder). Each client gets only ``-u`` with the port of the server started here. Prints
a PASS/FAIL table; the exit status is 0 when every client passed. Standard library only.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from triton_examples import ServerRun, tail

REPO = pathlib.Path(__file__).resolve().parent.parent
MODEL = REPO / "tests" / "repositories" / "sequence" / "simple_sequence"
CLIENTS = {  # client -> the protocol of its -u
    "simple_grpc_sequence_sync_infer_client.py": "grpc",
    "simple_grpc_sequence_stream_infer_client.py": "grpc",
    "simple_grpc_aio_sequence_stream_infer_client.py": "grpc",
    "simple_http_sequence_sync_infer_client.py": "http",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def examples_folder(path: pathlib.Path) -> pathlib.Path:
    for candidate in (path, path / "src" / "python" / "examples"):
        if (candidate / next(iter(CLIENTS))).exists():
            return candidate
    raise SystemExit(f"{path}: no {next(iter(CLIENTS))} here nor in src/python/examples")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=pathlib.Path, help="a triton-inference-server/client checkout")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the server and the clients")
    args = parser.parse_args()
    src = examples_folder(args.path)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pytriton-client-examples-") as tmp:
        work = pathlib.Path(tmp)
        shutil.copytree(MODEL, work / "models" / "simple_sequence")
        ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
        server = ServerRun(work / "models", ports, work / "server.log", args.python)
        problem = server.start(120)
        rows = []
        if problem is None:
            for client, protocol in CLIENTS.items():
                run = subprocess.run([args.python, str(src / client), "-u", f"127.0.0.1:{ports[protocol]}"],
                                     capture_output=True, text=True, timeout=120, check=False)
                ok = run.returncode == 0 and "PASS" in run.stdout
                rows.append((client, "PASS" if ok else "FAIL", "" if ok else (run.stdout + run.stderr)[-2000:]))
        problems = server.stop(30)
        if problem is not None:
            print(f"server: {problem}\n{tail(work / 'server.log', 40)}")
            return 1
        for client, verdict, detail in rows:
            print(f"{client:52} {verdict}")
            if detail:
                print(detail)
            failed += verdict != "PASS"
        for line in problems:
            print(f"clean-up: {line}")
        failed += len(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
