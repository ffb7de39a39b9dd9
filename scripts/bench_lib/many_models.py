"""``scripts/bench --many-models N[,N...]``: ready time and memory with many models, ours beside the real tritonserver
2.51 (issue 38).

For each N, one generated repository holds N copies (``m000`` ...) of the same small Python-backend model
(double_model.py: y = 2x on FP32[16], ``max_batch_size: 64``, dynamic batching with delay 0, one CPU instance).
Each round launches each server on it (the order alternates from round to round) and reads:

- **ready time**: from the launch until every one of the N models answers ``GET /v2/models/<m>/ready`` with 200
  (polled in turn: a model is asked again only once the ones before it answered);
- **PSS of the whole process tree** (``/proc/PID/smaps_rollup``, summed over the server and every descendant,
  found by walking /proc's parent links: ours' front-end, workers and any template process; tritonserver and its
  ``triton_python_backend_stub`` processes), read ``--settle`` seconds after ready, with each role's share;
- then one inference on every model (HTTP, 1 x 16 floats), checked to be 2x: "ready" must mean serving.

Figures are medians over the rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
import urllib.request

from bench_lib import procfs
from bench_lib.measure import log
from bench_lib.real_triton import RealTriton
from bench_lib.repo_double import write_repository
from bench_lib.scheduling import serve_launch
from bench_lib.servers import Server
from bench_lib.triton_launch import SERVERS, TritonServer, base_environment, ours_server, pss_by_role
from bench_lib.vs_triton import measure, uptime

FLOATS = 16


def parse_counts(text: str) -> list[int]:
    """The --many-models list: whole numbers >= 1, each once, in the order typed.

    Raises:
        ValueError: an entry that is not such a number, or none at all.
    """
    out: list[int] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"--many-models: {item!r} is not a number of models (1 or more)")
        if int(item) not in out:
            out.append(int(item))
    if not out:
        raise ValueError("--many-models: no number of models given")
    return out


def model_names(n: int) -> list[str]:
    return [f"m{i:03d}" for i in range(n)]


def infer_once(http_port: int, model: str) -> str | None:
    """One request (1 x 16 floats, 0..15) over HTTP/JSON; a problem in words, None when the answer is 2x."""
    body = json.dumps({"inputs": [{"name": "INPUT", "shape": [1, FLOATS], "datatype": "FP32",
                                   "data": list(range(FLOATS))}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v2/models/{model}/infer", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            out = json.loads(answer.read())["outputs"][0]["data"]
    except (OSError, ValueError, KeyError, IndexError) as e:
        return f"{model}: inference failed: {e}"
    return None if [float(x) for x in out] == [2.0 * i for i in range(FLOATS)] else f"{model}: wrong answer {out}"


class ManyModels:
    def __init__(self, args: argparse.Namespace, real: RealTriton | None) -> None:
        self.args, self.real = args, real
        self.servers = [s for s in SERVERS if s in args.servers]
        self.samples: dict[str, list[dict]] = {}  # "<server>/<N>" -> one dict per round
        self.problems: list[str] = []
        self.env = base_environment()
        self.backends = real.stage_backends(args.out_dir / "backends") if real and "triton" in self.servers else None

    def _repository(self, n: int) -> tuple[pathlib.Path, list[str]]:
        names = model_names(n)
        root = self.args.out_dir / f"repository-{n}"
        if not root.exists():
            write_repository(root, names, "dynamic", floats=dict.fromkeys(names, FLOATS))
        return root, names

    def launch(self, rnd: int, name: str, n: int) -> None:
        tag = f"m{rnd + 1}-{name}-{n}"
        root, names = self._repository(n)
        logfile = self.args.out_dir / f"{tag}-server.log"
        server: Server
        if name == "triton":
            assert self.real is not None and self.backends is not None
            server = TritonServer(self.real, self.backends, root, names, logfile, self.args.out_dir, self.env)
        else:
            server = ours_server(self.args.ours_python, root, names, logfile, self.args.out_dir, self.env)

        def body(s: Server) -> None:
            pids = s.refresh_tree()
            rss, pss = procfs.memory_kib(pids)
            roles = pss_by_role(name, pids)
            wrong = [p for p in (infer_once(s.http_port, m) for m in names) if p]
            self.problems.extend(f"{tag}: {p}" for p in wrong[:3])
            assert s.startup_s is not None
            sample = {"ready_s": s.startup_s, "pss_kib": pss, "rss_kib": rss, "processes": len(pids),
                      "pss_roles_kib": roles, "answered": len(names) - len(wrong), "load": procfs.loadavg()}
            self.samples.setdefault(f"{name}/{n}", []).append(sample)
            log(f"    {name:<6} {n:>3} models: ready after {s.startup_s:6.2f} s, {len(pids)} processes, PSS "
                f"{pss / 1024:7.1f} MiB (" + ", ".join(f"{k} {v / 1024:.1f}" for k, v in roles.items())
                + f"), {len(names) - len(wrong)}/{n} answered 2x")
        timeout = self.args.startup_timeout
        self.args.startup_timeout = timeout + 3.0 * n  # (many Python processes to start on a small machine)
        try:
            serve_launch(server, self.args, tag, body, self.problems)
        finally:
            self.args.startup_timeout = timeout

    def run(self) -> dict:
        t0, load_start, uptime_start = time.time(), procfs.loadavg(), uptime()
        for rnd in range(self.args.repeats):
            for n in self.args.many_models:
                for name in self.servers if rnd % 2 == 0 else list(reversed(self.servers)):
                    self.launch(rnd, name, n)
        return {"suite": "many-models", "samples": self.samples, "problems": self.problems,
                "counts": list(self.args.many_models), "servers": self.servers,
                "elapsed_s": time.time() - t0, "load_start": load_start, "load_end": procfs.loadavg(),
                "uptime_start": uptime_start, "uptime_end": uptime(),
                "machine": dataclasses.asdict(procfs.machine_info()), "repeats": self.args.repeats,
                "settle_s": self.args.settle}


def run_many_models(args: argparse.Namespace, real: RealTriton | None, meta: dict[str, str]) -> int:
    """`--many-models`: measure (or read --from-results), print the summary, write its part of the report."""
    from bench_lib import triton_report

    if args.from_results:
        result = json.loads(args.from_results.read_text())
    else:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        found = measure(args, ManyModels(args, real).run, meta)
        if found is None:
            return 130
        result = found
    print(triton_report.many_summary(result), file=sys.stdout)
    if not args.no_doc:
        triton_report.write_section(args.triton_doc, "many-models", triton_report.many_markdown(result))
        log(f"wrote {args.triton_doc}")
    return 1 if result["problems"] else 0
