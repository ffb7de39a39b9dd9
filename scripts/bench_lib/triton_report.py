"""The report of the suites against the real tritonserver 2.51 (vs_triton.py, many_models.py): console summaries and
docs/benchmarks-triton.md, where each suite rewrites its own section and leaves the other's as it was."""

from __future__ import annotations

import pathlib

from bench_lib.results import median
from bench_lib.scheduling import Target
from bench_lib.triton_launch import frontends, kind, label, roles
from bench_lib.vs_triton import P50_CASE, P50_TARGET

TITLE = "# Benchmarks: pytriton against the real tritonserver 2.51"
INTRO = ("Written by `scripts/bench --vs-triton`, `scripts/bench --many-models N,...` and `scripts/bench --streaming` "
         "(scripts/bench_lib/vs_triton.py, many_models.py, streaming.py; triton_report.py, stream_report.py); each "
         "suite rewrites its own section. Do not edit by hand.")
DEVICE_NOTE = (
    "**On a lent 16-core GPU machine** (issue 37 asks for one where 2 cores are the limit): `scripts/bench "
    "--vs-triton` runs there in two device calls back to back, after `scripts/device-bench-multife --prepare && "
    "scripts/device-gpu-tests --prepare && scripts/device-bench-peer --prepare` here (the header of "
    "scripts/device-bench-peer says what each makes): `run(command=\"scripts/device-bench-peer --stage\", "
    "carry=[\".devnv\"], timeout_s=300)` (NVIDIA's venv with tritonserver 2.51, checked with one inference), then at "
    "once `run(command=\"scripts/device-bench-peer --vs-triton\", carry=[\".devbench\"], timeout_s=600)`: the 7 "
    "cases, ours, ours on 4 front-end processes (`--ours-frontends 4`) and tritonserver, 3 alternating rounds with "
    "1000 ms windows, started launches bounded by `--time-limit 420`; under 5 minutes (4.7 on this 2-core machine). "
    "What comes back: `benchmarks-triton.md` (this section's tables with that machine's description; this file is "
    "left alone), `results.json`, `vs-triton.log` and `server-logs.tar.xz`; the summary is printed. Its figures go "
    "to docs/benchmarks-device.md.")
SECTIONS = ("vs-triton", "many-models", "streaming")
NOT_RUN = "_Not run yet: `scripts/bench --{}`._"


# ------------------------------------------------------------------------------------------------ figures ---
def figure(result: dict, key: str, field: str) -> float | None:
    """Median over the rounds of one field of one key's samples (None when no round measured it)."""
    return median([s.get(field) for s in result["samples"].get(key, [])])


def role_figure(result: dict, key: str, field: str, part: str) -> float | None:
    return median([(s.get(field) or {}).get(part) for s in result["samples"].get(key, [])])


def rounds(result: dict, key: str) -> str:
    """" (k of R rounds)" when only k of the R rounds measured `key` (a failed launch or perf_analyzer run), else ""."""
    k = len(result["samples"].get(key, []))
    return f" ({k} of {result['repeats']} rounds)" if 0 < k < result["repeats"] else ""


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "–" if x is None else f"{x / scale:,.{digits}f}"


def role_split(sample: dict) -> dict[str, float | None]:
    """One run's CPU µs per request of each role. The roles' readings span perf_analyzer's retry too (when its first
    attempt found no stable window) while the request count is the kept attempt's: the parts are scaled to that
    attempt's server CPU (server_cores x wall), which is exact when there was no retry."""
    parts, n = sample.get("cpu_us") or {}, sample.get("requests")
    known = [v for v in parts.values() if v is not None]
    if not n or not known or not sum(known):
        return parts
    scale = sample["server_cores"] * sample["wall_s"] / n * 1e6 / sum(known)
    return {k: (None if v is None else v * scale) for k, v in parts.items()}


def cpu_parts(result: dict, server: str, case: str) -> tuple[dict[str, float | None], float | None, float | None]:
    """(each role's CPU µs per request, perf_analyzer's, their total) for one server and case, medians."""
    key = f"{server}/{case}"
    splits = [role_split(s) for s in result["samples"].get(key, [])]
    parts = {r: median([sp.get(r) for sp in splits]) for r in roles(server)}
    pa = figure(result, key, "pa_cpu_us")
    known = [v for v in [*parts.values(), pa] if v is not None]
    return parts, pa, (sum(known) if known and len(known) == len(parts) + 1 else None)


def short(server: str) -> str:
    """A server of ours as the ratios name it: "ours", or "ours (N front-ends)"."""
    return "ours" if server == "ours" else f"ours ({frontends(server)} front-ends)"


def ours_variants(result: dict) -> list[str]:
    """The servers of ours on several front-end processes this run measured (--ours-frontends), in its order."""
    return [s for s in result["servers"] if kind(s) == "ours" and s != "ours"]


def vs_targets(result: dict, ours: str = "ours") -> list[Target]:
    """The issue's targets for one server of ours (default: ours as `pytriton serve` runs by default)."""
    out = []
    for c in result["cases"]:
        out.append(Target(c["label"], f"{short(ours)} / Triton throughput",
                          ratio(figure(result, f"{ours}/{c['key']}", "throughput"),
                                figure(result, f"triton/{c['key']}", "throughput")), c["target"]))
        if c["key"] == P50_CASE:
            out.append(Target(c["label"], f"{short(ours)} / Triton p50 latency",
                              ratio(figure(result, f"{ours}/{c['key']}", "p50_us"),
                                    figure(result, f"triton/{c['key']}", "p50_us")), P50_TARGET, False))
    return out


def setup_line(result: dict, what: str) -> str:
    m = result["machine"]
    return (f"{result.get('date', '?')}, commit {result.get('git', '?')} (pytriton {result.get('ours_version', '?')}, "
            f"nvidia-pytriton {result.get('nvidia_pytriton_version', '?')}); {m.get('cpu', '?')}, {m.get('cpus', '?')} "
            f"CPUs, {m.get('memory', '?')}, Linux {m.get('kernel', '?')}, Python {m.get('python', '?')}; "
            f"{what}; medians over {result['repeats']} round(s), "
            f"servers in alternating order; {result['elapsed_s'] / 60:.1f} minutes. Load averages (`uptime`) "
            f"{result.get('uptime_start', '?')} at the start, {result.get('uptime_end', '?')} at the end."
            + load_warning(result))


def load_warning(result: dict, then: str = " and the ratios must be measured again on a quiet machine") -> str:
    """A warning when other work kept the machine busy (1-minute load average above half its CPUs at either end);
    `then` says what must follow from it."""
    cpus = float(result["machine"].get("cpus") or 1)
    loads = [float(str(result.get(k) or "0").split()[0]) for k in ("uptime_start", "uptime_end")]
    if max(loads) <= cpus / 2:
        return ""
    return (f" **The machine was shared with other work during this run (1-minute load average up to {max(loads):.1f} "
            f"on {cpus:g} CPUs): the figures are noisy{then}.**")


# -------------------------------------------------------------------------------------------- vs-triton ---
def vs_rows(result: dict, ours: str = "ours") -> list[list[str]]:
    """Per case: Triton's and ours' (the server `ours` of ours) throughput and p50, the ratios."""
    out = []
    for c in result["cases"]:
        k = c["key"]
        tt, ot = figure(result, f"triton/{k}", "throughput"), figure(result, f"{ours}/{k}", "throughput")
        tp, op = figure(result, f"triton/{k}", "p50_us"), figure(result, f"{ours}/{k}", "p50_us")
        out.append([c["label"], fmt(tt) + rounds(result, f"triton/{k}"), fmt(ot) + rounds(result, f"{ours}/{k}"),
                    fmt(ratio(ot, tt), 1, 2), f"≥ {c['target']:g}",
                    fmt(tp, 1000, 3), fmt(op, 1000, 3), fmt(ratio(op, tp), 1, 2)])
    return out


def cpu_rows(result: dict) -> list[list[str]]:
    """Per case and server: CPU µs per request of each role and of perf_analyzer, the total, the machine's ceiling
    (its CPUs x 10^6 / total), the cores other processes used meanwhile."""
    cpus = float(result["machine"].get("cpus") or 0)
    out = []
    for c in result["cases"]:
        for server in result["servers"]:
            parts, pa, total = cpu_parts(result, server, c["key"])
            parts_text = " + ".join(f"{r} {fmt(v, 1, 0)}" for r, v in parts.items())
            ceiling = cpus * 1e6 / total if total else None
            out.append([c["label"], label(server), parts_text, fmt(pa, 1, 0), fmt(total, 1, 0), fmt(ceiling, 1, 0),
                        fmt(figure(result, f"{server}/{c['key']}", "throughput")),
                        fmt(figure(result, f"{server}/{c['key']}", "other_cores"), 1, 2)])
    return out


def budget_rows(result: dict) -> list[list[str]]:
    """Per case: what its throughput target asks of our two processes. The target is a throughput (target x Triton's
    measured); perf_analyzer needs its own CPU per request on the same CPUs, so at the target our front-end and
    workers together may use at most CPUs x 10^6 / target throughput - perf_analyzer's µs per request (the machine
    busy to the last cycle), or, if the run reaches the same share of its ceiling as ours did (our measured throughput
    / our ceiling: what is lost to waiting and to the other processes), share x CPUs x 10^6 / target throughput -
    perf_analyzer's. Beside it: our servers' CPU per request now, and Triton's (tritonserver + its stubs)."""
    cpus = float(result["machine"].get("cpus") or 0)
    out = []
    for c in result["cases"]:
        triton = figure(result, f"triton/{c['key']}", "throughput")
        ours = figure(result, f"ours/{c['key']}", "throughput")
        _, ours_pa, ours_total = cpu_parts(result, "ours", c["key"])
        _, triton_pa, triton_total = cpu_parts(result, "triton", c["key"])
        if not (cpus and triton and ours and ours_pa is not None and ours_total and triton_total):
            continue
        wanted = c["target"] * triton
        budget = cpus * 1e6 / wanted - ours_pa
        share = ours / (cpus * 1e6 / ours_total)
        at_share = share * cpus * 1e6 / wanted - ours_pa
        ours_server = ours_total - ours_pa
        triton_server = triton_total - (triton_pa or 0.0)
        out.append([c["label"], fmt(wanted, 1, 0), fmt(budget, 1, 0), f"{share:.2f}", fmt(at_share, 1, 0),
                    fmt(ours_server, 1, 0), fmt(triton_server, 1, 0),
                    fmt(ratio(ours_server, at_share) if at_share > 0 else None, 1, 1)])
    return out


def vs_summary(result: dict) -> str:
    lines = ["", f"ours vs tritonserver 2.51: medians over {result['repeats']} round(s), {result['elapsed_s']:.0f} s; "
             f"load {result.get('uptime_start')} -> {result.get('uptime_end')}",
             f"  {'case':<30} {'Triton /s':>10} {'ours /s':>10} {'ratio':>6}  {'p50 Triton':>10} {'p50 ours':>9} "
             f"{'ratio':>6}"]
    for r in vs_rows(result):
        lines.append(f"  {r[0]:<30} {r[1]:>10} {r[2]:>10} {r[3]:>6}  {r[5]:>10} {r[6]:>9} {r[7]:>6}")
    for variant in ours_variants(result):
        lines.append(f"  {short(variant)} (--frontend-processes {frontends(variant)}, an instance in each) vs Triton:")
        for r in vs_rows(result, variant):
            lines.append(f"  {r[0]:<30} {r[1]:>10} {r[2]:>10} {r[3]:>6}  {r[5]:>10} {r[6]:>9} {r[7]:>6}")
    lines.append("  CPU µs per request (roles + perf_analyzer = total; ceiling on this machine's CPUs):")
    rows = cpu_rows(result)
    width = max([18, *(len(r[1]) for r in rows)])
    for r in rows:
        lines.append(f"  {r[0]:<30} {r[1]:<{width}} {r[2]} + perf_analyzer {r[3]} = {r[4]}; ceiling {r[5]}/s")
    lines.append("  What each throughput target allows our servers (µs/req; docs/benchmarks-triton.md says how):")
    for r in budget_rows(result):
        lines.append(f"  {r[0]:<30} target {r[1]}/s: budget {r[2]}, at share {r[3]} {r[4]}; ours {r[5]}, "
                     f"Triton {r[6]}; over {r[7]}x")
    lines.append("Targets:")
    lines += [f"  {t.line()}" for t in vs_targets(result)]
    for variant in ours_variants(result):
        lines += [f"  {t.line()}" for t in vs_targets(result, variant)]
    if result["problems"]:
        lines.append("Problems:")
        lines += [f"  {p}" for p in result["problems"]]
    return "\n".join(lines)


def vs_markdown(result: dict) -> str:
    cpus = result["machine"].get("cpus", "?")
    out = [
        "## Throughput and latency on one model repository (issue 37)", "",
        setup_line(result, f"perf_analyzer {result.get('perf_analyzer', '?')}, measurement interval "
                           f"{result['interval_ms']} ms"), "",
        "The repository (scripts/bench_lib/repo_double.py, double_model.py): `double_small` (FP32[16]) and "
        "`double_1mib` (FP32[262144]), each a Triton Python-backend `model.py` computing y = 2x over the request list "
        "(`triton_python_backend_utils`), `max_batch_size: 64`, `dynamic_batching { max_queue_delay_microseconds: "
        f"{result.get('delay_us', 100)} }}`, one CPU instance. Ours: `pytriton serve --model-repository R`; Triton: "
        "`tritonserver --model-repository R` from the nvidia-pytriton 0.7.0 wheel (its Python backend and the stub of "
        "the venv's Python). perf_analyzer `-b 1`, zero input, one run per case and round.", "",
        "| case | Triton (/s) | ours (/s) | ours / Triton | target | Triton p50 (ms) | ours p50 (ms) | "
        "ours / Triton p50 |", "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in vs_rows(result)]
    for variant in ours_variants(result):
        n = frontends(variant)
        out += ["", f"### Ours on {n} front-end processes", "",
                f"Ours served with `pytriton serve --model-repository R --frontend-processes {n}` as a server of its "
                f"own in every round: {n} whole servers behind the same ports (the kernel gives each connection to "
                f"one of them), each with its own instance of each model, so {n} instances in all where Triton has "
                "one, and dynamic batches formed per process. The Triton columns are the same runs as above.", "",
                f"| case | Triton (/s) | {short(variant)} (/s) | {short(variant)} / Triton | target | Triton p50 (ms) "
                f"| {short(variant)} p50 (ms) | {short(variant)} / Triton p50 |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        out += ["| " + " | ".join(r) + " |" for r in vs_rows(result, variant)]
    targets = vs_targets(result) + [t for v in ours_variants(result) for t in vs_targets(result, v)]
    out += ["", "### Targets", "", "| case | figure | measured | target | met |", "|---|---|---:|---|---|"]
    for t in targets:
        op = "≥" if t.higher_is_better else "≤"
        met = {True: "yes", False: "**no**", None: "not measured"}[t.met]
        out.append(f"| {t.row} | {t.what} | {fmt(t.value, 1, 2)} | {op} {t.threshold:g} | {met} |")
    out += ["", "### CPU per request", "",
            "CPU time (utime + stime) of each role of the server's process tree and of perf_analyzer over one run, "
            "divided by the inferences the server's statistics counted in it. Ours: *front-end* = the "
            "`pytriton serve` process (and any front-end processes), *workers* = the model processes (and any warm "
            "template); Triton: *tritonserver* and its *Python stubs*. perf_analyzer runs on the same CPUs, so "
            f"**ceiling** = {cpus} CPUs x 10^6 / total µs is the most this machine could give the case with nothing "
            "else running; *other cores* is what the rest of the machine used meanwhile. On a shared machine the "
            "measured throughput also depends on the share of the CPUs each server wins against the other load (the "
            "scheduler gives more to a process with more runnable threads); CPU per request, and so the ceiling, "
            "depend much less on it.", "",
            "| case | server | roles (µs/req) | perf_analyzer (µs/req) | total (µs/req) | ceiling (/s) | measured (/s) "
            "| other cores |", "|---|---|---|---:|---:|---:|---:|---:|"]
    out += ["| " + " | ".join(r) + " |" for r in cpu_rows(result)]
    out += ["", "### What each throughput target asks of our servers' CPU", "",
            "At the target throughput (target x Triton's measured), perf_analyzer still needs its own CPU per request "
            f"on the same {cpus} CPUs, so our front-end and workers together may use at most "
            f"**budget** = {cpus} x 10^6 / target throughput - perf_analyzer's µs per request, with the machine busy "
            "to the last cycle. No run reaches its ceiling (waits, wake-ups, the other load): *share* is the part of "
            "our ceiling this run reached (measured / ceiling, from the table above), and *at this share* = share x "
            f"{cpus} x 10^6 / target throughput - perf_analyzer's µs per request, what our servers may use per request "
            "if a run at the target reaches the same share. *Now*: our servers' CPU per request in this run "
            "(front-end + workers), and Triton's (tritonserver + its Python stubs) for comparison; *over* = now / "
            "(at this share), how many times less CPU per request the target needs.", "",
            "| case | target (/s) | budget (µs/req) | share | at this share (µs/req) | ours now (µs/req) "
            "| Triton now (µs/req) | over |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    out += ["| " + " | ".join(r) + " |" for r in budget_rows(result)]
    if result["problems"]:
        out += ["", "### Problems seen", ""] + [f"- {p}" for p in result["problems"]]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ many-models ---
def many_rows(result: dict) -> list[list[str]]:
    out = []
    for n in result["counts"]:
        row = [str(n)]
        for server in ("triton", "ours"):
            key = f"{server}/{n}"
            row += [fmt(figure(result, key, "ready_s"), 1, 2) + rounds(result, key),
                    fmt(figure(result, key, "pss_kib"), 1024, 0),
                    fmt(figure(result, key, "processes"), 1, 0)]
        row += [fmt(ratio(figure(result, f"ours/{n}", "ready_s"), figure(result, f"triton/{n}", "ready_s")), 1, 2),
                fmt(ratio(figure(result, f"ours/{n}", "pss_kib"), figure(result, f"triton/{n}", "pss_kib")), 1, 2)]
        out.append(row)
    return out


def role_rows(result: dict) -> list[list[str]]:
    out = []
    for n in result["counts"]:
        for server in result["servers"]:
            key = f"{server}/{n}"
            parts = ", ".join(f"{r} {fmt(role_figure(result, key, 'pss_roles_kib', r), 1024, 1)}"
                              for r in roles(server))
            per_model = ratio(figure(result, key, "pss_kib"), n)
            out.append([str(n), label(server), parts, fmt(per_model, 1024, 1)])
    return out


def many_summary(result: dict) -> str:
    lines = ["", f"many models: medians over {result['repeats']} round(s), {result['elapsed_s']:.0f} s; "
             f"load {result.get('uptime_start')} -> {result.get('uptime_end')}",
             f"  {'N':>3}  {'Triton ready s':>14} {'PSS MiB':>8} {'procs':>5}   {'ours ready s':>12} {'PSS MiB':>8} "
             f"{'procs':>5}   ready ours/Triton  PSS ours/Triton"]
    for r in many_rows(result):
        lines.append(f"  {r[0]:>3}  {r[1]:>14} {r[2]:>8} {r[3]:>5}   {r[4]:>12} {r[5]:>8} {r[6]:>5}   {r[7]:>17}  "
                     f"{r[8]:>15}")
    for r in role_rows(result):
        lines.append(f"  {r[0]:>3} {r[1]:<18} PSS MiB: {r[2]}; per model {r[3]}")
    if result["problems"]:
        lines.append("Problems:")
        lines += [f"  {p}" for p in result["problems"]]
    return "\n".join(lines)


def many_markdown(result: dict) -> str:
    out = [
        "## Many models: ready time and memory (issue 38)", "",
        setup_line(result, f"PSS read {result.get('settle_s', 1):g} s after ready"), "",
        "N copies (`m000` ...) of one small Python-backend model (y = 2x on FP32[16], `max_batch_size: 64`, "
        "`dynamic_batching { }`, one CPU instance) in one generated repository, served by each server. **Ready**: "
        "from the launch until every model answers `GET /v2/models/<m>/ready` with 200 (then each model answered "
        "one inference, checked). **PSS**: `/proc/PID/smaps_rollup` summed over the whole process tree (ours: "
        "`pytriton serve`, its workers and any other descendant; Triton: tritonserver and its "
        "`triton_python_backend_stub` processes), so that shared pages count once.", "",
        "| models | Triton ready (s) | Triton PSS (MiB) | Triton processes | ours ready (s) | ours PSS (MiB) | "
        "ours processes | ready ours / Triton | PSS ours / Triton |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in many_rows(result)]
    out += ["", "| models | server | PSS by role (MiB) | PSS / models (MiB) |", "|---:|---|---|---:|"]
    out += ["| " + " | ".join(r) + " |" for r in role_rows(result)]
    if result["problems"]:
        out += ["", "### Problems seen", ""] + [f"- {p}" for p in result["problems"]]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- the file ---
def _marks(name: str) -> tuple[str, str]:
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def write_section(doc: pathlib.Path, name: str, text: str) -> None:
    """Put `text` as section `name` of `doc` (made with every section "not run yet" if it does not exist)."""
    current = doc.read_text() if doc.exists() else ""
    sections = {}
    for s in SECTIONS:
        start, end = _marks(s)
        i, j = current.find(start), current.find(end)
        sections[s] = current[i + len(start):j].strip("\n") if 0 <= i < j else NOT_RUN.format(s)
    sections[name] = text.strip("\n")
    body = [TITLE, "", INTRO, "", DEVICE_NOTE, ""]
    for s in SECTIONS:
        start, end = _marks(s)
        body += [start, sections[s], end, ""]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(body))
