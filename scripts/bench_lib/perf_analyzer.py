"""perf_analyzer: its command line, and what its CSV and its console output say."""

from __future__ import annotations

import csv
import dataclasses
import io
import pathlib
import re

from bench_lib.cases import Case
from bench_lib.results import PaCounts

UNSTABLE = "Failed to obtain stable measurement"
_ERROR = re.compile(r"error|failed|exception|abort", re.IGNORECASE)


@dataclasses.dataclass
class PaOptions:
    """The perf_analyzer knobs the bench passes through (its --interval, --max-trials, ... options)."""

    binary: pathlib.Path
    interval_ms: int
    max_trials: int
    stability: int
    timeout_s: int
    extra_args: list[str] = dataclasses.field(default_factory=list)  # e.g. --ssl-grpc-* (bench_lib/tls_bench.py)


@dataclasses.dataclass
class CsvRow:
    """One concurrency of perf_analyzer's -f CSV (latencies in microseconds)."""

    concurrency: int
    throughput: float
    p50_us: float
    p90_us: float
    p99_us: float


def command(opts: PaOptions, case: Case, port: int, concurrency: str, csv_path: pathlib.Path) -> list[str]:
    return [str(opts.binary), "-m", case.model, "-i", case.protocol, "-u", f"127.0.0.1:{port}",
            "--shared-memory", case.shm, "--concurrency-range", concurrency, "-b", "1",
            "--measurement-interval", str(opts.interval_ms), "--max-trials", str(opts.max_trials),
            "--stability-percentage", str(opts.stability), "--input-data", "zero", "-f", str(csv_path),
            *opts.extra_args]


def parse_csv(text: str) -> list[CsvRow]:
    """The rows of perf_analyzer's CSV that hold a measurement (header and blank lines skipped)."""
    rows = []
    for r in csv.DictReader(io.StringIO(text)):
        if not (r.get("Concurrency") or "").isdigit():
            continue
        rows.append(CsvRow(concurrency=int(r["Concurrency"]), throughput=float(r["Inferences/Second"]),
                           p50_us=float(r["p50 latency"]), p90_us=float(r["p90 latency"]),
                           p99_us=float(r["p99 latency"])))
    return rows


def read_csv(path: pathlib.Path) -> list[CsvRow]:
    """parse_csv of a file; no rows when perf_analyzer wrote none (it had nothing stable to report)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return parse_csv(f.read())


def parse_text(text: str) -> dict[int, PaCounts]:
    """Per concurrency, from the console output: the client's request count, the server's counts."""
    out: dict[int, PaCounts] = {}
    cur: PaCounts | None = None
    side = None
    for line in text.splitlines():
        m = re.match(r"Request concurrency: (\d+)", line)
        if m:
            cur, side = PaCounts(), None
            out[int(m.group(1))] = cur
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("Client:"):
            side = "client"
        elif s.startswith("Server:"):
            side = "server"
        elif side == "client" and s.startswith("Request count:"):
            cur.client_count = int(s.split()[2])
        elif side == "server" and s.startswith("Inference count:"):
            cur.server_count = int(s.split()[2])
        elif side == "server" and s.startswith("Execution count:"):
            cur.server_executions = int(s.split()[2])
    return out


def error_lines(text: str) -> list[str]:
    """Lines of the console output that report a failure (not the 'no stable measurement' notice)."""
    return [ln.strip() for ln in text.splitlines() if _ERROR.search(ln) and "stable measurement" not in ln]


def count_mismatch(concurrency: int, counts: PaCounts) -> str | None:
    """A message when the server's inference count is off the client's request count by more than noise.

    perf_analyzer reads the server's statistics around its measurement window with HTTP calls of its own, so
    the two counts differ by the requests in flight at the edges and those completed while a statistics call
    was on its way: about c each side, and ~1 % at thousands of requests per second.
    """
    client, server = counts.client_count, counts.server_count
    if client is None or server is None:
        return None
    if abs(client - server) > max(2 * concurrency + 2, client // 100):
        return f"server inference count {server} != client request count {client}"
    return None


def verdict(tag: str, rc: int, timed_out: bool, unstable: bool, errors: list[str], opts: PaOptions,
            txt_path: pathlib.Path) -> str | None:
    """The problem one run shows, if any: killed, a bad exit status (2 = could not stabilise is expected), errors."""
    if timed_out:
        return f"{tag}: perf_analyzer killed after {opts.timeout_s} s ({txt_path})"
    if rc != 0 and not (unstable and rc == 2):
        return f"{tag}: perf_analyzer exited {rc} ({txt_path}): {' | '.join(errors[:3])}"
    if errors:
        return f"{tag}: perf_analyzer printed errors ({txt_path}): {' | '.join(errors[:3])}"
    return None
