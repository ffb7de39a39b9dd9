"""docs/benchmarks.png: throughput bars per case (both servers) over a panel of ratios against their targets."""

from __future__ import annotations

import dataclasses
import pathlib

from bench_lib.cases import SERVER_LABEL
from bench_lib.report import case_rows, ratio, sides, thr_target
from bench_lib.results import BenchResult, Meta, ServerAggregate


@dataclasses.dataclass
class RatioBar:
    label: str
    ratio: float | None
    target: float | None
    higher_is_better: bool

    @property
    def colour(self) -> str:
        if self.ratio is None or self.target is None:
            return "#999999"
        met = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
        return "#2a9d3a" if met else "#d1495b"


def throughput_rows(result: BenchResult,
                    agg: dict[str, ServerAggregate]) -> list[tuple[str, float | None, float | None, str, int]]:
    """(tick label, our throughput, NVIDIA's, case key, concurrency) per bar pair."""
    ours, nv = sides(agg)
    rows = []
    for key, c, o, n in case_rows(result.cases, ours, nv):
        lab = result.case_labels[key].replace(", ", "\n").replace("dynamic batching", "batched")
        rows.append((f"{lab}\nc={c}", o.throughput, n.throughput, key, c))
    return rows


def ratio_bars(result: BenchResult, agg: dict[str, ServerAggregate]) -> list[RatioBar]:
    """Throughput ratios per case, then p50 at c=1, start-up and RSS."""
    ours, nv = sides(agg)
    items = []
    for lab, o, n, key, _c in throughput_rows(result, agg):
        tgt = thr_target(key)[1] if "batched" not in key else None
        items.append(RatioBar("throughput " + lab.replace("\n", " "), ratio(o, n), tgt, True))
    for key in result.cases:
        o50, n50 = ours.case(key, 1).p50_us, nv.case(key, 1).p50_us
        if o50 and n50 and "batched" not in key:
            items.append(RatioBar(f"p50 c=1 {result.case_labels[key]}", o50 / n50, 0.5, False))
    items.append(RatioBar("start-up to ready", ratio(ours.startup_s, nv.startup_s), 0.3, False))
    items.append(RatioBar("RSS after ready", ratio(ours.rss_ready_kib, nv.rss_ready_kib), 0.5, False))
    return items


def plot(path: pathlib.Path, result: BenchResult, agg: dict[str, ServerAggregate], meta: Meta) -> bool:
    """Write the png; False (and nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    rows = throughput_rows(result, agg)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(10, 0.75 * len(rows) + 3), 10),
                                   gridspec_kw={"height_ratios": [3, 2]})
    xs = list(range(len(rows)))
    width = 0.4
    ax1.bar([x - width / 2 for x in xs], [r[1] or 0 for r in rows], width, label=SERVER_LABEL["ours"],
            color="#2a7ab9")
    ax1.bar([x + width / 2 for x in xs], [r[2] or 0 for r in rows], width, label=SERVER_LABEL["nvidia"],
            color="#76b900")
    ax1.set_yscale("log")
    ax1.set_ylabel("throughput (infer/s, log scale)")
    ax1.set_xticks(xs)
    ax1.set_xticklabels([r[0] for r in rows], fontsize=7)
    ax1.legend()
    ax1.set_title(f"perf_analyzer, batch 1, median of {result.settings.repeats} "
                  f"({meta.date}, {meta.machine.cpus} CPUs, shared)", fontsize=10)
    ax1.grid(axis="y", alpha=0.3)
    items = ratio_bars(result, agg)
    ys = list(range(len(items)))
    # Bars start at 1 (parity): right of it ours is ahead on throughput, left of it on the other metrics.
    ax2.barh(ys, [(i.ratio or 1.0) - 1.0 for i in items], left=1.0, color=[i.colour for i in items])
    for y, item in zip(ys, items):
        if item.target is not None:
            ax2.plot([item.target, item.target], [y - 0.4, y + 0.4], color="black", lw=1.5)
        if item.ratio is not None:
            ax2.text(item.ratio, y, f" {item.ratio:.2f}×", va="center", fontsize=6)
    ax2.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax2.set_xscale("log")
    known = [i.ratio for i in items if i.ratio]
    lo = min([0.2, *known]) * 0.8
    hi = max([5.0, *known]) * 1.3
    ax2.set_xlim(lo, hi)
    ticks = [t for t in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3, 4, 6, 10, 20, 50) if lo <= t <= hi]
    ax2.set_xticks(ticks)
    ax2.set_xticklabels([f"{t:g}×" for t in ticks])
    ax2.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax2.set_yticks(ys)
    ax2.set_yticklabels([i.label for i in items], fontsize=6)
    ax2.invert_yaxis()
    ax2.set_xlabel("ours / NVIDIA (log scale); black tick = target; green = target met")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
