"""What a benchmark run measured (dataclasses, saved as results.json with `dataclasses.asdict`) and the medians.

results.json = {"result": BenchResult, "aggregate": {server: ServerAggregate}, "meta": Meta}; `load_results`
reads it back (also a file written before these classes existed: same keys, some optional ones missing).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
import types
import typing
from typing import Any, TypeVar

from bench_lib.procfs import Machine

T = TypeVar("T")


@dataclasses.dataclass
class PaCounts:
    """Counts perf_analyzer printed for one concurrency: the client's requests, the server's inferences."""

    client_count: int | None = None
    server_count: int | None = None
    server_executions: int | None = None


@dataclasses.dataclass
class RunInfo:
    """Whole-run figures of one perf_analyzer run (all its concurrencies together)."""

    wall_s: float
    server_cpu_s: float
    pa_cpu_s: float
    total_cpu_s: float
    other_cpu_s: float  # CPU other processes of the machine used meanwhile
    load_start: float
    load_end: float
    requests: int | None  # the server's inference count over the run (statistics API)
    peak_rss_kib: int
    peak_pss_kib: int
    rc: int
    unstable: bool
    steal_s: float | None = None  # None in results of runs before steal was measured
    server_cpu_us_per_request: float | None = None

    @property
    def other_cores(self) -> float:
        return self.other_cpu_s / self.wall_s

    @property
    def stolen_cores(self) -> float | None:
        """CPU time the hypervisor took from this machine during the run, in cores."""
        return self.steal_s / self.wall_s if self.steal_s is not None and self.wall_s else None


@dataclasses.dataclass
class CaseRun:
    """One concurrency of one perf_analyzer run (a row of its CSV)."""

    throughput: float
    p50_us: float
    p90_us: float
    p99_us: float
    counts: PaCounts
    attempt: int
    run: RunInfo
    repeat: int | None = None


@dataclasses.dataclass
class ServerSamples:
    """Everything measured on one server over the repeats; cases: case key -> str(concurrency) -> runs."""

    startup_s: list[float] = dataclasses.field(default_factory=list)
    rss_ready_kib: list[int] = dataclasses.field(default_factory=list)
    pss_ready_kib: list[int] = dataclasses.field(default_factory=list)
    peak_rss_kib: list[int] = dataclasses.field(default_factory=list)
    cases: dict[str, dict[str, list[CaseRun]]] = dataclasses.field(default_factory=dict)
    processes: int | None = None

    def add(self, case_key: str, concurrency: int, run: CaseRun) -> None:
        self.cases.setdefault(case_key, {}).setdefault(str(concurrency), []).append(run)

    def runs(self) -> list[CaseRun]:
        return [r for per_c in self.cases.values() for runs in per_c.values() for r in runs]


@dataclasses.dataclass
class Settings:
    repeats: int
    quick: bool
    concurrency: str
    batched_concurrency: str
    interval_ms: int
    max_trials: int
    stability: int


@dataclasses.dataclass
class InprocessRow:
    """One in-process measurement (bench_lib/inprocess.py): a mode (sync, async, grpc, http) of one size."""

    mode: str
    size: str  # small | 1mib
    concurrency: int
    n: int
    throughput: float
    p50_us: float
    p99_us: float


@dataclasses.dataclass
class BenchResult:
    samples: dict[str, ServerSamples]  # ours | nvidia
    versions: dict[str, str]  # what each server's GET /v2 says
    problems: list[str]
    cases: list[str]  # case keys, in report order
    case_labels: dict[str, str]
    elapsed_s: float
    settings: Settings
    inprocess: list[InprocessRow] = dataclasses.field(default_factory=list)  # empty: not measured


@dataclasses.dataclass
class Meta:
    """Where and on what the run happened, for the report's setup section."""

    date: str
    machine: Machine
    load_start: float
    load_end: float
    other_cores: float
    steal_cores: float | None
    git: str
    ours_version: str
    nvidia_version: str
    pa_version: str
    out_dir_rel: str


@dataclasses.dataclass
class CaseAggregate:
    """Medians over the repeats of one case at one concurrency on one server (all None: not measured)."""

    throughput: float | None = None
    throughput_min: float | None = None
    throughput_max: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    cpu_us: float | None = None
    other_cores: float | None = None
    steal_cores: float | None = None
    # repeat -> (throughput, CPU stolen in cores)
    per_repeat: dict[str, tuple[float, float | None]] = dataclasses.field(default_factory=dict)
    n: int = 0


@dataclasses.dataclass
class ServerAggregate:
    """Medians over the launches of one server (all None: the server was not measured)."""

    startup_s: float | None = None
    rss_ready_kib: float | None = None
    pss_ready_kib: float | None = None
    peak_rss_kib: float | None = None
    n_launches: int = 0
    processes: int | None = None
    cases: dict[str, CaseAggregate] = dataclasses.field(default_factory=dict)  # "case key@concurrency" -> medians

    def case(self, key: str, concurrency: int) -> CaseAggregate:
        return self.cases.get(f"{key}@{concurrency}") or CaseAggregate()

    def concurrencies(self, key: str) -> set[int]:
        return {int(k.split("@")[1]) for k in self.cases if k.split("@")[0] == key}


def median(xs: list[float | None] | list[float] | list[int]) -> float | None:
    """Median of the values that are not None; None when there are none."""
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def aggregate_case(runs: list[CaseRun]) -> CaseAggregate:
    # Runs of results written before `repeat` was recorded: their order is the repeat.
    return CaseAggregate(
        throughput=median([r.throughput for r in runs]),
        throughput_min=min(r.throughput for r in runs),
        throughput_max=max(r.throughput for r in runs),
        p50_us=median([r.p50_us for r in runs]),
        p99_us=median([r.p99_us for r in runs]),
        cpu_us=median([r.run.server_cpu_us_per_request for r in runs]),
        other_cores=median([r.run.other_cores for r in runs]),
        steal_cores=median([r.run.stolen_cores for r in runs]),
        per_repeat={str(r.repeat if r.repeat is not None else i + 1): (r.throughput, r.run.stolen_cores)
                    for i, r in enumerate(runs)},
        n=len(runs),
    )


def aggregate(result: BenchResult) -> dict[str, ServerAggregate]:
    """Per server: medians over the repeats of every launch figure and of every case at every concurrency."""
    agg = {}
    for name, smp in result.samples.items():
        agg[name] = ServerAggregate(
            startup_s=median(smp.startup_s), rss_ready_kib=median(smp.rss_ready_kib),
            pss_ready_kib=median(smp.pss_ready_kib), peak_rss_kib=median(smp.peak_rss_kib),
            n_launches=len(smp.startup_s), processes=smp.processes,
            cases={f"{key}@{c}": aggregate_case(runs) for key, per_c in smp.cases.items() for c, runs in per_c.items()},
        )
    return agg


# ------------------------------------------------------------------------------------ results.json ---
def from_dict(cls: type[T], data: Any) -> T:
    """Build `cls` (a dataclass, or list/dict/tuple/optional of one) from what `dataclasses.asdict` + JSON made.

    Keys the class does not know are ignored; fields with a default may be missing.
    """
    return typing.cast(T, _convert(cls, data))


def _convert(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _convert(next(a for a in args if a is not type(None)), data)
    if origin is list:
        return [_convert(args[0], x) for x in data]
    if origin is dict:
        return {k: _convert(args[1], v) for k, v in data.items()}
    if origin is tuple:
        return tuple(_convert(a, x) for a, x in zip(args, data))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _convert(hints[k], v) for k, v in data.items() if k in known})
    if tp is float and isinstance(data, int):
        return float(data)
    return data


def save_results(path: pathlib.Path, result: BenchResult, agg: dict[str, ServerAggregate], meta: Meta) -> None:
    data = {"result": dataclasses.asdict(result), "aggregate": {k: dataclasses.asdict(v) for k, v in agg.items()},
            "meta": dataclasses.asdict(meta)}
    path.write_text(json.dumps(data, indent=1, default=str))


def load_results(path: pathlib.Path) -> tuple[BenchResult, Meta]:
    """The result and meta of an earlier run's results.json (the aggregate is recomputed from the result)."""
    data = json.loads(path.read_text())
    return from_dict(BenchResult, data["result"]), from_dict(Meta, data["meta"])
