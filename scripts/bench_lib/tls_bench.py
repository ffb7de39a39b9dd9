"""`scripts/bench --tls`: our server's gRPC with and without TLS, side by side, so that TLS's cost per request can
be stated.

Makes a CA and a server certificate (127.0.0.1) with the `openssl` command, then launches serve_double.py twice
(plain gRPC, then `TritonConfig(grpc_use_ssl=True, ...)`) and runs perf_analyzer over the gRPC cases against each,
the TLS one with `--ssl-grpc-use-ssl true --ssl-grpc-root-certifications-file CA`. Prints a table: throughput,
p50 and the server's CPU per request, plain and TLS, and their differences. Writes no doc; the logs, CSVs and
tls.json go to the output folder. perf_analyzer keeps its connections, so the figures are the cost of encrypting
the requests and responses, not of handshakes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import subprocess
import time

from bench_lib.cases import MAIN_MODELS, Case
from bench_lib.measure import log, run_case
from bench_lib.perf_analyzer import PaOptions
from bench_lib.results import CaseRun
from bench_lib.servers import Server, ServerSpec

QUICK_CASES = [Case("grpc", "small", "none"), Case("grpc", "1mib", "none")]
FULL_CASES = QUICK_CASES + [Case("grpc", "small", "system"), Case("grpc", "1mib", "system")]


def make_certs(folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it (EC P-256, valid 2 days)."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=bench CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", "server.pem", "-extfile", "server.ext")
    return {name: folder / name for name in ("ca.pem", "server.pem", "server.key")}


def _measure(args: argparse.Namespace, spec: ServerSpec, opts: PaOptions, mode: str, cases: list[Case],
             extra_server_args: list[str], problems: list[str]) -> dict[str, dict[int, CaseRun]]:
    server = Server(spec, "off", MAIN_MODELS, args.out_dir / f"tls-{mode}-server.log", args.out_dir,
                    extra_args=extra_server_args)
    log(f"{mode}: starting our server")
    results: dict[str, dict[int, CaseRun]] = {}
    try:
        if not server.start(args.startup_timeout):
            return results
        time.sleep(args.settle)
        for case in cases:
            res = run_case(opts, server, case, args.concurrency, args.out_dir, f"tls-{mode}-{case.key}", problems)
            results[case.key] = res
            for c in sorted(res):
                r = res[c]
                cpu = r.run.server_cpu_us_per_request
                log(f"    {mode:<5} {case.key:<18} c={c:<2} {r.throughput:9.1f}/s  p50 {r.p50_us / 1000:7.3f} ms"
                    + (f"  server CPU {cpu:6.0f} us/req" if cpu else ""))
    finally:
        server.stop()
        problems.extend(server.problems)
        problems.extend(server.scan_log())
    return results


def table(plain: dict[str, dict[int, CaseRun]], tls: dict[str, dict[int, CaseRun]]) -> str:
    lines = ["| case | c | plain req/s | TLS req/s | TLS/plain | p50 plain ms | p50 TLS ms | p50 +us | "
             "server CPU plain us/req | TLS us/req | +us/req |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key in plain:
        for c in sorted(plain[key]):
            a, b = plain[key][c], tls.get(key, {}).get(c)
            if b is None:
                continue
            ca, cb = a.run.server_cpu_us_per_request, b.run.server_cpu_us_per_request
            cpu = f"{ca:.0f} | {cb:.0f} | {cb - ca:+.0f}" if ca and cb else "- | - | -"
            lines.append(f"| {key} | {c} | {a.throughput:.0f} | {b.throughput:.0f} | {b.throughput / a.throughput:.2f} "
                         f"| {a.p50_us / 1000:.3f} | {b.p50_us / 1000:.3f} | {b.p50_us - a.p50_us:+.0f} | {cpu} |")
    return "\n".join(lines)


def run_tls(args: argparse.Namespace, opts: PaOptions, spec: ServerSpec) -> int:
    """`args`: bench.py's options (--quick, --cases, --concurrency, ...); `spec`: how to start our server."""
    args.out_dir.mkdir(parents=True, exist_ok=True)
    log(f"output folder: {args.out_dir}")
    certs = make_certs(args.out_dir / "certs")
    cases = QUICK_CASES if args.quick else FULL_CASES
    if args.cases:
        cases = [c for c in FULL_CASES if c.key in set(args.cases.split(","))]
    tls_opts = dataclasses.replace(opts, extra_args=["--ssl-grpc-use-ssl", "true",
                                                     "--ssl-grpc-root-certifications-file", str(certs["ca.pem"])])
    problems: list[str] = []
    plain = _measure(args, spec, opts, "plain", cases, [], problems)
    tls = _measure(args, spec, tls_opts, "tls", cases,
                   ["--grpc-server-cert", str(certs["server.pem"]), "--grpc-server-key", str(certs["server.key"])],
                   problems)
    text = table(plain, tls)
    print(text)
    (args.out_dir / "tls.md").write_text(text + "\n")
    (args.out_dir / "tls.json").write_text(json.dumps(
        {mode: {key: {str(c): dataclasses.asdict(r) for c, r in res.items()} for key, res in data.items()}
         for mode, data in (("plain", plain), ("tls", tls))}, indent=1, default=str))
    for problem in problems:
        log(f"problem: {problem}")
    return 1 if problems or not plain or not tls else 0
