"""The chaos soak's result for one phase (a dataclass, saved as JSON), its verdict and its text summary."""

from __future__ import annotations

import dataclasses
from typing import Any

from soak_lib.chaos_outcomes import HANG, UNEXPLAINED, WRONG, explain
from soak_lib.server import RssReading
from soak_lib.tally import Tally

AFTER_FRONTEND_KILL = "[after the front-end kill] "  # what a client puts before an error it met after the kill
# A client process runs a thread per slot and a few of its own, and gRPC's and gevent's: past this it leaks.
CLIENT_THREADS_BASE = 64
CLIENT_THREADS_PER_SLOT = 4


@dataclasses.dataclass
class ChaosSettings:
    phase: str  # "explicit": one server, model control explicit; "group": --frontend-processes N
    minutes: float
    concurrency: int
    processes: int
    frontend_processes: int
    execution_timeout_s: float
    client_timeout_s: float  # of every ordinary call: execution timeout + margin; a call past it is a hang
    fault_interval_s: float
    fault_kinds: list[str]
    rss_growth_limit_mib: float
    fd_growth_limit: int
    warmup_s: float
    max_requests: int


@dataclasses.dataclass
class ChaosResult:
    settings: ChaosSettings
    started: str  # UTC
    commit: str = ""
    load_s: float = 0.0
    stopped_early: str | None = None
    kinds: dict[str, Any] = dataclasses.field(default_factory=dict)  # Tally.to_dict(), probes included
    faults: dict[str, Any] = dataclasses.field(default_factory=dict)  # FaultLog.to_dict()
    rss_ready: RssReading | None = None
    rss: list[RssReading] = dataclasses.field(default_factory=list)
    rss_end: RssReading | None = None
    fds_ready: int | None = None  # the server process's open fds before the load
    fds_end: int | None = None  # after the load, the drain and the probes
    pending_max: int | None = None
    pending_end: int | None = None
    workers_end: dict[str, int] = dataclasses.field(default_factory=dict)  # model -> workers running at the end
    workers_expected: dict[str, int] = dataclasses.field(default_factory=dict)
    registrations_left: list[str] = dataclasses.field(default_factory=list)  # system shm regions still registered
    mapped_regions_left: list[str] = dataclasses.field(default_factory=list)  # client files still mapped by the server
    dead_owner_segments: list[str] = dataclasses.field(default_factory=list)  # of killed processes, while serving
    frontend_kill: dict[str, Any] = dataclasses.field(default_factory=dict)  # group: which, when, the group's end
    client_threads_max: int = 0  # the most threads a client process had (the soak's own leak check)
    client_problems: list[str] = dataclasses.field(default_factory=list)
    client_leftovers: list[str] = dataclasses.field(default_factory=list)
    hold_leftovers: list[str] = dataclasses.field(default_factory=list)
    server_exit: int | None = None
    server_stop_s: float = 0.0  # from SIGINT (or, in the group phase, from the front-end kill) to the exit
    server_leftovers: list[str] = dataclasses.field(default_factory=list)
    log_tracebacks: int = 0
    log_errors: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)

    @property
    def tally(self) -> Tally:
        return Tally.from_dict(self.kinds)

    def rss_warm(self) -> list[RssReading]:
        warm = [r for r in self.rss if r.t_s >= self.settings.warmup_s]
        return warm or self.rss

    def rss_max(self) -> RssReading | None:
        readings = [r for r in (self.rss_ready, *self.rss, self.rss_end) if r is not None]
        return max(readings, key=lambda r: r.total_kib) if readings else None

    def rss_growth_kib(self) -> int | None:
        """Server + worker RSS at the end (after the load) against the first readings under load after the warm-up
        (their median): what stayed. (Killed workers restart small, so the readings under load swing.)"""
        warm = self.rss_warm()
        if not warm or self.rss_end is None:
            return None
        first = sorted(r.total_kib for r in warm[: max(1, len(warm) // 3)])
        return self.rss_end.total_kib - first[len(first) // 2]


@dataclasses.dataclass
class Outcomes:
    """The calls of one phase, judged: per kind (ok, cancelled, explained, wrong, hang, unexplained) and errors by
    the fault that explains them."""

    per_kind: dict[str, dict[str, int]]
    by_label: dict[str, int]
    bad: list[tuple[str, str, int, str]]  # (category, kind, count, example) of the wrong, hung and unexplained

    def total(self, category: str) -> int:
        return sum(row[category] for row in self.per_kind.values())


def judge(tally: Tally) -> Outcomes:
    per_kind: dict[str, dict[str, int]] = {}
    by_label: dict[str, int] = {}
    bad = []
    for name, t in sorted(tally.kinds.items()):
        row = {"ok": t.ok, "cancelled": t.cancelled, "explained": 0, WRONG: 0, HANG: 0, UNEXPLAINED: 0}
        for cls, e in t.errors.items():
            message = e.example or cls
            after_kill = message.startswith(AFTER_FRONTEND_KILL)
            category, label = explain(message.removeprefix(AFTER_FRONTEND_KILL), frontend_killed=after_kill)
            if name.startswith("probe-") and category == "explained":
                category, label = UNEXPLAINED, UNEXPLAINED  # probes run after the faults: nothing explains an error
            row[category] += e.count
            if category == "explained":
                by_label[label] = by_label.get(label, 0) + e.count
            else:
                bad.append((category, name, e.count, message))
        per_kind[name] = row
    return Outcomes(per_kind, dict(sorted(by_label.items(), key=lambda kv: -kv[1])), bad)


def verdict(result: ChaosResult) -> list[str]:
    """Why the phase fails; empty when it passes."""
    s = result.settings
    out = judge(result.tally)
    failures = []
    for category, what in ((WRONG, "wrong answer(s)"), (HANG, "hang(s): call(s) without an answer within the client "
                                                               f"timeout of {s.client_timeout_s:g} s"),
                           (UNEXPLAINED, "error(s) that no fault explains")):
        if out.total(category):
            failures.append(f"{out.total(category)} {what}")
    if not out.total("ok"):
        failures.append("no request succeeded")
    faults = result.faults.get("counts", {})
    injected = sum(n for per in faults.values() for o, n in per.items() if not o.startswith("skipped"))
    if not injected:
        failures.append("no fault was injected")
    failures += [f"fault {p}" for p in result.faults.get("problems", [])]
    if result.stopped_early:
        failures.append(f"load stopped early: {result.stopped_early}")
    failures += result.client_problems
    threads_limit = CLIENT_THREADS_BASE + (s.concurrency // max(1, s.processes) + 1) * CLIENT_THREADS_PER_SLOT
    if result.client_threads_max > threads_limit:
        failures.append(f"a client process of the soak had {result.client_threads_max} threads (limit {threads_limit}):"
                        " the soak's own clients leak threads")
    group = s.phase == "group"
    if not group:
        if result.pending_end != 0:
            failures.append(f"nv_inference_pending_request_count is {result.pending_end} after the load (must be 0)")
        if result.workers_end != result.workers_expected:
            failures.append(f"worker processes at the end {result.workers_end}, expected {result.workers_expected}")
        if result.fds_ready is not None and result.fds_end is not None \
                and result.fds_end - result.fds_ready > s.fd_growth_limit:
            failures.append(f"the server's open fds grew from {result.fds_ready} to {result.fds_end} "
                            f"(limit +{s.fd_growth_limit})")
        growth = result.rss_growth_kib()
        if growth is not None and growth > s.rss_growth_limit_mib * 1024:
            failures.append(f"server + worker RSS grew {growth / 1024:.0f} MiB (limit {s.rss_growth_limit_mib:g} MiB)")
        if result.server_exit != 0:
            failures.append(f"server exit status {result.server_exit} (stop took {result.server_stop_s:.1f} s)")
    else:
        kill = result.frontend_kill
        if not kill.get("pid"):
            failures.append("no front-end process was killed")
        elif result.server_exit is None or result.server_exit == 0 or not kill.get("logged"):
            failures.append(f"after front-end process pid {kill.get('pid')} was killed the group exited with status "
                            f"{result.server_exit}, its log {'names' if kill.get('logged') else 'does not name'} it "
                            "(expected: a non-zero exit naming the process)")
    for what, items in (("registrations left after the clients unregistered", result.registrations_left),
                        ("client regions still mapped by the server", result.mapped_regions_left),
                        ("segments of dead processes left while serving", result.dead_owner_segments),
                        ("left behind by the server", result.server_leftovers),
                        ("hold files left", result.hold_leftovers)):
        if items:
            failures.append(f"{what}: {', '.join(items[:5])}" + (f" (+{len(items) - 5} more)" if len(items) > 5 else ""))
    if result.log_tracebacks:
        failures.append(f"{result.log_tracebacks} traceback(s) in the server log")
    return failures


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.1f}"


def summary(result: ChaosResult) -> str:
    s = result.settings
    tally = result.tally
    out = judge(tally)
    head = (f"chaos soak, phase '{s.phase}' ({'model control explicit, one server' if s.phase != 'group' else f'--frontend-processes {s.frontend_processes}'}), "
            f"{result.started}, commit {result.commit or '?'}: {result.load_s / 60:.1f} min of load (limit {s.minutes:g}), "
            f"{s.concurrency} calls in flight from {s.processes} client processes; execution timeout "
            f"{s.execution_timeout_s:g} s, client timeout {s.client_timeout_s:g} s; a fault every ~{s.fault_interval_s:g} s")
    lines = [head, "", "requests by kind:",
             f"  {'kind':<26} {'ok':>8} {'deadline':>8} {'fault':>7} {'wrong':>6} {'hang':>5} {'unexpl':>6} "
             f"{'p50 ms':>7} {'p99 ms':>8} {'max ms':>8}"]
    for name, row in out.per_kind.items():
        t = tally.kinds[name]
        lines.append(f"  {name:<26} {row['ok']:>8} {row['cancelled']:>8} {row['explained']:>7} {row[WRONG]:>6} "
                     f"{row[HANG]:>5} {row[UNEXPLAINED]:>6} {_ms(t.latency.percentile(50)):>7} "
                     f"{_ms(t.latency.percentile(99)):>8} {_ms(t.latency.max_s if t.ok else None):>8}")
    lines.append(f"  {'total':<26} {out.total('ok'):>8} {out.total('cancelled'):>8} {out.total('explained'):>7} "
                 f"{out.total(WRONG):>6} {out.total(HANG):>5} {out.total(UNEXPLAINED):>6}")
    lines.append("  (deadline: calls cut by their 1-5 ms deadline, as meant; fault: errors a fault explains)")
    if out.by_label:
        lines += ["", "errors explained by a fault:"] + [f"  {n:>8}  {label}" for label, n in out.by_label.items()]
    if out.bad:
        lines += ["", "wrong answers, hangs and unexplained errors (count, kind, first message):"]
        lines += [f"  {n:>8}  {category} in {kind}: {example[:300]}" for category, kind, n, example in out.bad]
    lines += ["", "faults by kind and outcome:"]
    for kind, per in result.faults.get("counts", {}).items():
        lines.append(f"  {kind}: " + ", ".join(f"{o} {n}" for o, n in sorted(per.items(), key=lambda kv: -kv[1])))
    for problem in result.faults.get("problems", [])[:10]:
        lines.append(f"  PROBLEM {problem[:300]}")
    if result.frontend_kill:
        k = result.frontend_kill
        lines.append(f"  front-end process {k.get('index', '?')} (pid {k.get('pid')}) killed at {k.get('t_s', 0):.0f} s "
                     f"of the load; the group exited {k.get('exit_after_s', float('nan')):.1f} s later with status "
                     f"{result.server_exit}; its log names it: {'yes' if k.get('logged') else 'no'}")
    lines += ["", "leaks:"]
    if s.phase != "group":
        lines.append(f"  workers at the end: {result.workers_end} (expected {result.workers_expected})")
        lines.append(f"  server fds: {result.fds_ready} at ready, {result.fds_end} at the end "
                     f"(limit +{s.fd_growth_limit})")
        lines.append(f"  nv_inference_pending_request_count: max {result.pending_max}, at the end {result.pending_end}")
        lines.append(f"  registrations left: {result.registrations_left or 'none'}; client regions mapped: "
                     f"{result.mapped_regions_left or 'none'}")
    lines.append(f"  segments of dead processes while serving: {result.dead_owner_segments or 'none'}")
    lines.append(f"  after the stop: {', '.join(result.server_leftovers) if result.server_leftovers else 'nothing'} "
                 f"left by the server; hold files left: {result.hold_leftovers or 'none'}")
    if result.client_leftovers:
        lines.append(f"  client shared-memory files left (removed by the soak): {len(result.client_leftovers)}")
    lines.append(f"  the soak's own client processes: at most {result.client_threads_max} threads")
    lines += ["", *_memory_lines(result)]
    stop_what = "from the front-end kill to the group's exit" if s.phase == "group" else "after SIGINT"
    lines.append(f"server stop: exit status {result.server_exit}, {result.server_stop_s:.1f} s {stop_what}")
    if result.log_errors:
        lines.append(f"server log: {result.log_tracebacks} traceback(s); first error lines: "
                     + " | ".join(e[:160] for e in result.log_errors[:3]))
    if result.stopped_early:
        lines.append(f"load stopped early: {result.stopped_early}")
    lines += ["", "PASS" if not result.failures else "FAIL:\n" + "\n".join(f"  - {f}" for f in result.failures)]
    return "\n".join(lines) + "\n"


def _memory_lines(result: ChaosResult) -> list[str]:
    top = result.rss_max()
    if top is None:
        return ["RSS: no reading"]
    parts = []
    if result.rss_ready:
        parts.append(f"ready {_mib(result.rss_ready.server_kib)} + {_mib(result.rss_ready.workers_kib)}")
    parts.append(f"max {_mib(top.server_kib)} + {_mib(top.workers_kib)} (at {top.t_s:.0f} s)")
    if result.rss_end:
        parts.append(f"end {_mib(result.rss_end.server_kib)} + {_mib(result.rss_end.workers_kib)}")
    growth = result.rss_growth_kib()
    return ["RSS MiB, server + workers: " + ", ".join(parts),
            "growth (end against the first readings after the warm-up): "
            + ("–" if growth is None else f"{growth / 1024:+.0f} MiB")
            + f" (limit {result.settings.rss_growth_limit_mib:g})"]


def to_json_dict(result: ChaosResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
    data["passed"] = not result.failures
    out = judge(result.tally)
    data["judged"] = {"per_kind": out.per_kind, "by_label": out.by_label,
                      "bad": [dict(zip(("category", "kind", "count", "example"), b)) for b in out.bad]}
    return data
