"""The scheduling suite's figures against issue 18's targets: console summary and markdown."""

from __future__ import annotations

from bench_lib.results import median

LABEL = {"ours": "pytriton (ours)", "nvidia": "NVIDIA PyTriton"}


def figure(result: dict, key: str, field: str = "throughput") -> float | None:
    """The median over the repeats of one figure (None when no repeat measured it)."""
    return median([s[field] for s in result["samples"].get(key, [])])


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def targets(result: dict) -> list:
    from bench_lib.scheduling import Target

    rows = result["rows"]
    out = []
    if "batching" in rows:
        for c in (8, 16):
            out.append(Target("dynamic batching, 16 floats", f"ours / NVIDIA throughput at c={c}",
                              ratio(figure(result, f"batching/ours/small/c{c}"),
                                    figure(result, f"batching/nvidia/small/c{c}")), 3.0))
            out.append(Target("dynamic batching, 1 MiB system shm", f"ours / NVIDIA throughput at c={c}",
                              ratio(figure(result, f"batching/ours/1mib-shm/c{c}"),
                                    figure(result, f"batching/nvidia/1mib-shm/c{c}")), 5.0))
    if "cpu" in rows:
        ours2 = figure(result, "cpu/ours/i2/c4")
        out.append(Target("CPU-bound Python, 2 instances", "ours 2 / ours 1 instance throughput",
                          ratio(ours2, figure(result, "cpu/ours/i1/c4")), 1.7))
        out.append(Target("CPU-bound Python, 2 instances", "ours / NVIDIA throughput (2 instances each)",
                          ratio(ours2, figure(result, "cpu/nvidia/i2/c4")), 1.7))
    if "sequence" in rows:
        out.append(Target("sequence batching, c=8", "sequence / dynamic batcher throughput",
                          ratio(figure(result, "sequence/ours/sequence/c8"),
                                figure(result, "sequence/ours/dynamic/c8")), 0.8))
    if "cache" in rows:
        hit = median([c["hit"]["p50_us"] for c in result["cache"]])
        miss = median([c["miss"]["p50_us"] for c in result["cache"]])
        out.append(Target("response cache", "hit p50 / miss p50", ratio(hit, miss), 0.5, higher_is_better=False))
    return out


def _fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "–" if x is None else f"{x / scale:.{digits}f}"


def table_rows(result: dict) -> list[tuple[str, str, str, str]]:
    """(row, server / variant, throughput /s, p50 ms) for every figure measured."""
    names = {
        "batching": "dynamic batching, gRPC", "cpu": "CPU-bound Python (c=4)", "sequence": "stateful model (c=8)",
    }
    out = []
    for key in sorted(result["samples"]):
        row, server, variant, conc = key.split("/")
        variant = {"small": "16 floats, no shm", "1mib-shm": "1 MiB, system shm", "i1": "1 instance",
                   "i2": "2 instances", "sequence": "sequence batcher (direct)",
                   "dynamic": "dynamic batcher (no sequence batching)"}.get(variant, variant)
        out.append((names.get(row, row), f"{LABEL.get(server, server)}, {variant}, {conc.replace('c', 'c=')}",
                    _fmt(figure(result, key)), _fmt(figure(result, key, "p50_us"), 1000, 2)))
    for field in ("hit", "miss"):
        if result["cache"]:
            p50 = median([c[field]["p50_us"] for c in result["cache"]])
            p99 = median([c[field]["p99_us"] for c in result["cache"]])
            out.append(("response cache (c=1)", f"pytriton (ours), cache {field}, p99 {_fmt(p99, 1000, 3)} ms",
                        "–", _fmt(p50, 1000, 3)))
    return out


def summary(result: dict) -> str:
    lines = ["", "Scheduling suite (issue 18): medians over "
             f"{result['repeats']} repeat(s), {result['elapsed_s']:.0f} s; load average "
             f"{result['load_start']:.2f} -> {result['load_end']:.2f}, other load "
             f"{_fmt(result['other_cores'], 1, 2)} cores"]
    for row, what, thr, p50 in table_rows(result):
        lines.append(f"  {row:<26} {what:<62} {thr:>9}/s  p50 {p50} ms")
    lines.append("Targets:")
    lines += [f"  {t.line()}" for t in targets(result)]
    if result["problems"]:
        lines.append("Problems:")
        lines += [f"  {p}" for p in result["problems"]]
    return "\n".join(lines)


def markdown(result: dict, date: str, git: str) -> str:
    m = result["machine"]
    out = [
        "# Benchmarks: scheduling (issue 18)", "",
        "Written by `scripts/bench --suite scheduling` (scripts/bench_lib/scheduling.py); do not edit by hand.", "",
        f"{date}, commit {git}; {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs; medians over "
        f"{result['repeats']} repeat(s), perf_analyzer measurement interval {result['interval_ms']} ms; "
        f"load average {result['load_start']:.2f} at the start, {result['load_end']:.2f} at the end; CPU used by "
        f"other processes during the runs (median) {_fmt(result['other_cores'], 1, 2)} cores.", "",
        "## Targets", "", "| row | figure | measured | target | met |", "|---|---|---|---|---|",
    ]
    for t in targets(result):
        op = ">=" if t.higher_is_better else "<="
        met = {True: "yes", False: "**no**", None: "not measured"}[t.met]
        out.append(f"| {t.row} | {t.what} | {_fmt(t.value, 1, 2)} | {op} {t.threshold:g} | {met} |")
    out += ["", "## Figures", "", "| row | server, variant, concurrency | throughput (/s) | p50 (ms) |",
            "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in table_rows(result)]
    out += ["", "## What each row runs", "",
            "- **Dynamic batching**: `serve_double.py --batching dynamic` (PyTriton's default `DynamicBatcher()`, "
            "max_batch_size 64, one instance) under each package; perf_analyzer over gRPC, 16 floats without shared "
            "memory and 1 MiB through system shared memory, c = 8 and 16.",
            "- **CPU-bound Python**: `sched_models.spin`, a pure-Python loop of "
            "60,000 additions per request (about 2 ms, holding the GIL), no batcher; ours "
            "`pytriton serve sched_models.py:spin --instances N` (N worker processes), NVIDIA's "
            "`bind(infer_func=[spin] * N)` (N threads of one process, the way PyTriton makes instances); c = 4. "
            "Two instances can only double the throughput with two CPU cores free for the workers besides the "
            "front-end and perf_analyzer: on a machine with fewer (see the load above), this row measures the machine.",
            "- **Sequence batching** (ours only: NVIDIA PyTriton has no sequence batcher): `sched_models.accumulate` "
            "(a running sum per correlation id) with `--sequence-batching direct` (START, READY, CORRID controls), "
            "max_batch_size 8, beside the same callable with the dynamic batcher; perf_analyzer sends 8 concurrent "
            "sequences (its default length, 20 requests).",
            "- **Response cache** (ours): `sched_models.double` with `--response-cache --cache-config "
            "local,size=16777216`; `cache_probe.py` sends one request at a time over gRPC, alternating a hit (the "
            "same input) and a miss (an input never sent before); the server's cache_hit/cache_miss counts are "
            "checked against the client's.", ""]
    if result["problems"]:
        out += ["## Problems seen", ""] + [f"- {p}" for p in result["problems"]] + [""]
    return "\n".join(out)
