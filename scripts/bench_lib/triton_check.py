"""Does the real tritonserver 2.51 of a venv serve a Python-backend model on this machine? One launch on the vs-triton
repository's ``double_small`` (readiness, then one inference over HTTP/JSON, y = 2x checked), as
``scripts/device-bench-peer --stage`` checks a freshly staged venv before the measuring call. Standard library only:
it runs before the other wheels are installed.

    python scripts/bench_lib/triton_check.py VENV/bin/python FOLDER     (exit 0: it serves; FOLDER keeps its log)
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
import urllib.error
import urllib.request

if __package__ in (None, ""):  # run as a file: import `bench_lib` as a package from scripts/
    _HERE = pathlib.Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from bench_lib.real_triton import RealTriton
from bench_lib.repo_double import write_repository
from bench_lib.triton_launch import TritonServer, base_environment

MODEL = "double_small"


def infer_once(http_port: int) -> str | None:
    """One HTTP/JSON inference of y = 2x on 16 floats; None when the answer is right, else what was wrong."""
    body = {"inputs": [{"name": "INPUT", "shape": [1, 16], "datatype": "FP32", "data": [float(i) for i in range(16)]}]}
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v2/models/{MODEL}/infer",
                                 data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        return f"the inference failed: {e}"
    data = [o.get("data") for o in answer.get("outputs", [])]
    if data != [[2.0 * i for i in range(16)]]:
        return f"the inference answered {answer!r}, not y = 2x"
    return None


def check(python: pathlib.Path, folder: pathlib.Path, timeout_s: float = 120.0) -> list[str]:
    """What stops tritonserver from serving the model here (empty: it serves). Nothing is left running."""
    real = RealTriton.of_python(python)
    why = real.missing()
    if why:
        return [f"the real tritonserver cannot run: {why}"]
    folder.mkdir(parents=True, exist_ok=True)
    repository = write_repository(folder / "repository", [MODEL], "dynamic", 100)
    server = TritonServer(real, real.stage_backends(folder / "backends"), repository, [MODEL], folder / "triton.log",
                          folder, base_environment())
    problems: list[str] = []
    t0 = time.monotonic()
    try:
        if server.start(timeout_s):
            print(f"tritonserver ready in {time.monotonic() - t0:.1f} s ({real.binary})", flush=True)
            wrong = infer_once(server.http_port)
            if wrong:
                problems.append(wrong)
    finally:
        server.stop()
    return problems + server.problems + server.scan_log()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(pathlib.Path(argv[0]), pathlib.Path(argv[1]))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
