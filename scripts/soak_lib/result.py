"""The soak's result (a dataclass, saved as JSON), its verdict and its text summary."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from soak_lib.server import RssReading
from soak_lib.tally import Tally


@dataclasses.dataclass
class SoakSettings:
    minutes: float
    concurrency: int
    processes: int
    aio_slots: int  # per process, of its share of the concurrency
    cancel_share: float
    request_timeout_s: float
    max_requests: int
    rss_growth_limit_mib: float
    warmup_s: float
    instances: int
    stop_on_wedge_s: float
    kinds: list[str]
    batching: str  # dynamic | off


@dataclasses.dataclass
class SoakResult:
    settings: SoakSettings
    started: str  # UTC
    load_s: float = 0.0  # how long the clients ran
    stopped_early: str | None = None  # why the load ended before its time, if it did
    kinds: dict[str, Any] = dataclasses.field(default_factory=dict)  # Tally.to_dict(), probes included
    rss_ready: RssReading | None = None  # before the load
    rss: list[RssReading] = dataclasses.field(default_factory=list)  # during the load, every few seconds
    rss_end: RssReading | None = None  # after the load, the drain and the probes
    pending_max: int | None = None
    pending_end: int | None = None  # after the clients stopped and a short drain
    # client processes killed at the hard stop, or gone without their final report (their counts are missing)
    client_problems: list[str] = dataclasses.field(default_factory=list)
    client_leftovers: list[str] = dataclasses.field(default_factory=list)  # their regions, removed by the soak
    server_leftovers: list[str] = dataclasses.field(default_factory=list)
    server_exit: int | None = None
    server_stop_s: float = 0.0
    log_tracebacks: int = 0
    log_errors: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)

    @property
    def tally(self) -> Tally:
        return Tally.from_dict(self.kinds)

    def rss_warm(self) -> list[RssReading]:
        """The readings under load after the warm-up (all of them if the load ended before it)."""
        warm = [r for r in self.rss if r.t_s >= self.settings.warmup_s]
        return warm or self.rss

    def rss_max(self) -> RssReading | None:
        readings = [r for r in (self.rss_ready, *self.rss, self.rss_end) if r is not None]
        return max(readings, key=lambda r: r.total_kib) if readings else None

    def rss_growth_kib(self) -> int | None:
        """How much server + worker RSS grew under load after the warm-up: the median of the last third of the
        readings minus that of the first third (medians: a single burst is not growth); None with < 2 readings."""
        warm = self.rss_warm()
        if len(warm) < 2:
            return None
        third = max(1, len(warm) // 3)
        return int(statistics.median(r.total_kib for r in warm[-third:])
                   - statistics.median(r.total_kib for r in warm[:third]))


def verdict(result: SoakResult) -> list[str]:
    """Why the soak fails; empty when it passes."""
    failures = []
    ok, _cancelled, errors = result.tally.totals()
    if errors:
        failures.append(f"{errors} unexpected error(s) (not deliberate cancellations)")
    if not ok:
        failures.append("no request succeeded")
    if result.stopped_early and not result.stopped_early.startswith("request bound"):
        failures.append(f"load stopped early: {result.stopped_early}")
    if result.pending_end is None:
        failures.append("nv_inference_pending_request_count unreadable at the end")
    elif result.pending_end != 0:
        failures.append(f"nv_inference_pending_request_count is {result.pending_end} after the load (must be 0)")
    growth = result.rss_growth_kib()
    if growth is not None and growth > result.settings.rss_growth_limit_mib * 1024:
        failures.append(f"server + worker RSS grew {growth / 1024:.0f} MiB after the warm-up "
                        f"(limit {result.settings.rss_growth_limit_mib:g} MiB)")
    failures += result.client_problems
    if result.server_exit != 0:
        failures.append(f"server exit status {result.server_exit} (stop took {result.server_stop_s:.1f} s)")
    if result.server_leftovers:
        failures.append(f"left behind by the server: {', '.join(result.server_leftovers[:5])}"
                        + (f" (+{len(result.server_leftovers) - 5} more)" if len(result.server_leftovers) > 5 else ""))
    if result.log_tracebacks:
        failures.append(f"{result.log_tracebacks} traceback(s) in the server log")
    return failures


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.2f}"


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def summary(result: SoakResult) -> str:
    """A short text report: per kind, errors by class, memory, pending gauge, stop, verdict."""
    s = result.settings
    tally = result.tally
    head = (f"soak {result.started}: {result.load_s / 60:.1f} min of load (limit {s.minutes:g}), concurrency "
            f"{s.concurrency} in {s.processes} client processes (up to {s.aio_slots} grpc.aio tasks each), "
            f"{s.instances} instances, " + ("dynamic batching" if s.batching == "dynamic" else "no dynamic batching"))
    lines = [head, "",
             f"{'kind':<20} {'ok':>9} {'cancelled':>9} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"]
    for name, t in sorted(tally.kinds.items()):
        lines.append(f"{name:<20} {t.ok:>9} {t.cancelled:>9} {t.error_count:>7} {_ms(t.latency.percentile(50)):>8} "
                     f"{_ms(t.latency.percentile(99)):>8} {_ms(t.latency.max_s if t.ok else None):>8}")
    ok, cancelled, errors = tally.totals()
    lines.append(f"{'total':<20} {ok:>9} {cancelled:>9} {errors:>7}")
    if errors:
        lines += ["", "errors by kind and class (count, class, first message):"]
        for name, t in sorted(tally.kinds.items()):
            for cls, e in sorted(t.errors.items(), key=lambda kv: -kv[1].count):
                lines.append(f"  {e.count:>7}  {name}: {cls}" + (f"\n           e.g. {e.example[:200]}"
                                                                 if e.example != cls else ""))
    lines.append("")
    lines += _memory_lines(result)
    lines.append(f"nv_inference_pending_request_count: max {result.pending_max}, at the end {result.pending_end}")
    lines.append(f"server stop: exit status {result.server_exit} after {result.server_stop_s:.1f} s; left behind: "
                 + (", ".join(result.server_leftovers) if result.server_leftovers else "nothing"))
    if result.client_leftovers:
        lines.append(f"client shared-memory files left (removed by the soak): {len(result.client_leftovers)}")
    if result.log_errors:
        lines.append(f"server log: {result.log_tracebacks} traceback(s), {len(result.log_errors)}+ error line(s), "
                     f"first: {result.log_errors[0][:200]}")
    if result.stopped_early:
        lines.append(f"load stopped early: {result.stopped_early}")
    lines += ["", "PASS" if not result.failures else "FAIL:\n" + "\n".join(f"  - {f}" for f in result.failures)]
    return "\n".join(lines) + "\n"


def _memory_lines(result: SoakResult) -> list[str]:
    warm, top = result.rss_warm(), result.rss_max()
    if not warm or top is None:
        return ["RSS: no reading"]
    line = "RSS MiB, server + workers:"
    if result.rss_ready:
        line += f" ready {_mib(result.rss_ready.server_kib)} + {_mib(result.rss_ready.workers_kib)},"
    line += (f" under load at {warm[0].t_s:.0f} s {_mib(warm[0].server_kib)} + {_mib(warm[0].workers_kib)},"
             f" at {warm[-1].t_s:.0f} s {_mib(warm[-1].server_kib)} + {_mib(warm[-1].workers_kib)},")
    if result.rss_end:
        line += f" after the load {_mib(result.rss_end.server_kib)} + {_mib(result.rss_end.workers_kib)},"
    growth = result.rss_growth_kib()
    return [line + f" max {_mib(top.total_kib)} (at {top.t_s:.0f} s)",
            "growth under load after the warm-up (median of the last third of the readings - of the first third): "
            + ("–" if growth is None else f"{growth / 1024:+.0f} MiB")
            + f" (limit {result.settings.rss_growth_limit_mib:g})"]


def to_json_dict(result: SoakResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
    data["passed"] = not result.failures
    return data
