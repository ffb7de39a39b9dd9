"""The "repository model" rows: the same y = 2x served from a model repository (`pytriton serve
--model-repository`, a worker process per instance) beside our `bind` path and NVIDIA PyTriton's `bind`."""

from __future__ import annotations

from collections.abc import Callable

from bench_lib.results import BenchResult, ServerAggregate

REPO_VS_BIND = (">=", 0.9)  # throughput of the repository model / our bind: at most 10 % slower


def _fmt(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _rows(result: BenchResult, agg: dict[str, ServerAggregate]):
    repo, ours, nv = (agg.get(k) or ServerAggregate() for k in ("repo", "ours", "nvidia"))
    for key in result.cases:
        for c in sorted(repo.concurrencies(key) | ours.concurrencies(key)):
            yield key, c, repo.case(key, c), ours.case(key, c), nv.case(key, c)


def repo_table(w: Callable[[str], None], result: BenchResult, agg: dict[str, ServerAggregate]) -> None:
    """The markdown section; nothing when the repository server was not measured."""
    if "repo" not in agg:
        return
    w("## Repository model vs bind")
    w("")
    w("The same y = 2x model (FP32, `max_batch_size: 64`, one `KIND_CPU` instance, the same batching) as a Triton "
      "Python-backend model (`scripts/bench_lib/double_model.py`, repository written by `repo_double.py`) served by "
      "`pytriton serve --model-repository` (its instance is a worker process), against the callable bound with "
      "`Triton().bind` (ours: hosted by the user's process) and NVIDIA PyTriton's `bind` (its closest setup). "
      f"Target: repository / our bind throughput {REPO_VS_BIND[0].replace('>=', '≥')} {REPO_VS_BIND[1]:g}×.")
    w("")
    w("| case | conc. | repository (infer/s) | ours bind (infer/s) | NVIDIA bind (infer/s) | repository / ours bind "
      "| target | repository p50 (ms) | ours bind p50 (ms) | repository min–max |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for key, c, r, o, n in _rows(result, agg):
        ratio = _ratio(r.throughput, o.throughput)
        ok = "–" if ratio is None else ("✅" if ratio >= REPO_VS_BIND[1] else "❌") + f" ≥ {REPO_VS_BIND[1]:g}×"
        spread = f"{r.throughput_min:,.0f}–{r.throughput_max:,.0f} (n={r.n})" if r.n else "–"
        w(f"| {result.case_labels[key]} | {c} | {_fmt(r.throughput)} | {_fmt(o.throughput)} | {_fmt(n.throughput)} | "
          f"{'–' if ratio is None else f'{ratio:.2f}×'} | {ok} | {_fmt(r.p50_us and r.p50_us / 1000, 2)} | "
          f"{_fmt(o.p50_us and o.p50_us / 1000, 2)} | {spread} |")
    w("")


def repo_summary(result: BenchResult, agg: dict[str, ServerAggregate]) -> list[str]:
    """Console lines; none when the repository server was not measured."""
    if "repo" not in agg:
        return []
    head = f"{'repository model vs bind':<40} {'c':>2} {'repo/s':>9} {'bind/s':>9} {'NVIDIA/s':>9} {'repo/bind':>9}"
    out = ["", head]
    for key, c, r, o, n in _rows(result, agg):
        ratio = _ratio(r.throughput, o.throughput)
        out.append(f"{result.case_labels[key]:<40} {c:>2} {_fmt(r.throughput):>9} {_fmt(o.throughput):>9} "
                   f"{_fmt(n.throughput):>9} {'–' if ratio is None else f'{ratio:.2f}×':>9}")
    return out
