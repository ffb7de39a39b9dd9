"""The wire suite's figures against issue 21's targets: console summary and markdown (docs/benchmarks-wire.md)."""

from __future__ import annotations

from bench_lib.results import median
from bench_lib.scheduling import Target
from bench_lib.wire import BYTES_PER_REQUEST, CONN_CONCURRENCIES, LARGE_CONCURRENCY, MULTIFE_CONCURRENCY

LABEL = {"ours": "pytriton (ours)", "nvidia": "NVIDIA PyTriton"}
PROTO = {"grpc": "gRPC", "http": "HTTP"}
GIB = 1024 ** 3


def figure(result: dict, key: str, field: str = "throughput") -> float | None:
    """The median over the repeats of one figure (None when no repeat measured it)."""
    return median([s.get(field) for s in result["samples"].get(key, [])])


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def gib_per_s(result: dict, key: str) -> float | None:
    """Tensor data each way (the request's input, the answer's output), GiB/s, at the median throughput."""
    tp = figure(result, key)
    return None if tp is None else tp * BYTES_PER_REQUEST[key.split("/")[0]] / GIB


def targets(result: dict) -> list[Target]:
    rows, out = result["rows"], []
    c = LARGE_CONCURRENCY
    if "large" in rows:
        for p in ("grpc", "http"):
            ours, nv = f"large/ours/{p}-none/c{c}", f"large/nvidia/{p}-none/c{c}"
            out.append(Target(f"16 MiB, {PROTO[p]}, no shm, c={c}", "ours / NVIDIA throughput",
                              ratio(figure(result, ours), figure(result, nv)), 2.5))
            out.append(Target(f"16 MiB, {PROTO[p]}, no shm, c={c}", "ours, tensor GiB/s each way",
                              gib_per_s(result, ours), 2.0))
        for p in ("grpc", "http"):
            out.append(Target(f"16 MiB, {PROTO[p]}, system shm, c={c}", "ours / NVIDIA throughput",
                              ratio(figure(result, f"large/ours/{p}-system/c{c}"),
                                    figure(result, f"large/nvidia/{p}-system/c{c}")), 6.0))
    if "conn" in rows:
        base = CONN_CONCURRENCIES[0]
        for p in ("grpc", "http"):
            for c in CONN_CONCURRENCIES[1:]:
                out.append(Target(f"16 floats, {PROTO[p]}, c={c}", "ours / NVIDIA throughput",
                                  ratio(figure(result, f"conn/ours/{p}/c{c}"),
                                        figure(result, f"conn/nvidia/{p}/c{c}")), 4.0))
            for c in CONN_CONCURRENCIES[1:]:
                out.append(Target(f"16 floats, {PROTO[p]}, c={c}", f"ours at c={c} / ours at c={base}",
                                  ratio(figure(result, f"conn/ours/{p}/c{c}"),
                                        figure(result, f"conn/ours/{p}/c{base}")),
                                  1.0))
    if "connfe" in rows:
        for p in ("grpc", "http"):
            for n in frontends(result):
                for c in CONN_CONCURRENCIES[1:]:
                    out.append(Target(f"16 floats, {PROTO[p]}, c={c}", f"ours N={n} / NVIDIA throughput",
                                      ratio(figure(result, f"connfe/ours/n{n}-{p}/c{c}"),
                                            figure(result, f"conn/nvidia/{p}/c{c}")), 4.0))
    return out


def frontends(result: dict) -> list[int]:
    """The connfe row's numbers of front-end processes (as run; from the figures' keys for a result without them)."""
    if result.get("frontends"):
        return list(result["frontends"])
    found = {int(k.split("/")[2].split("-")[0][1:]) for k in result["samples"] if k.startswith("connfe/")}
    return sorted(found)


def _fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "–" if x is None else f"{x / scale:,.{digits}f}"


def _variant(row: str, variant: str) -> str:
    if row == "large":
        proto, shm = variant.split("-")
        return f"16 MiB, {PROTO[proto]}, {'system shm' if shm == 'system' else 'no shm'}"
    if row == "multife":
        n, proto = variant.split("-")
        return f"16 floats, {PROTO[proto]}, --frontend-processes {n[1:]}"
    if row == "connfe":
        n, proto = variant.split("-")
        return f"16 floats, {PROTO[proto]}, N={n[1:]} front-end processes"
    return f"16 floats, {PROTO[variant]}"


_RANK = {"large": 0, "conn": 1, "connfe": 1, "multife": 2}  # connfe's figures beside conn's, per protocol and c


def _order(key: str) -> tuple:
    row, server, variant, conc = key.split("/")
    if row == "connfe":
        n, proto = variant.split("-")
        return (_RANK[row], proto, int(conc[1:]), 2, int(n[1:]))
    return (_RANK.get(row, 9), variant, int(conc[1:]), int(server != "ours"), 0)


def figure_rows(result: dict) -> list[list[str]]:
    """Per figure: what, server, c, throughput /s, p50 ms, GiB/s each way, server and client CPU µs/request, cores
    (server, client, others), the machine's ceiling (its CPUs over server + client CPU per request)."""
    cpus = float(result["machine"].get("cpus") or 0)
    out = []
    for key in sorted(result["samples"], key=_order):
        row, server, variant, conc = key.split("/")
        srv, cli = figure(result, key, "server_cpu_us"), figure(result, key, "client_cpu_us")
        ceiling = cpus * 1e6 / (srv + cli) if srv is not None and cli is not None and srv + cli > 0 else None
        gib = gib_per_s(result, key) if row == "large" else None
        out.append([_variant(row, variant), LABEL.get(server, server), conc[1:], _fmt(figure(result, key)),
                    _fmt(figure(result, key, "p50_us"), 1000, 2), _fmt(gib, 1, 2), _fmt(srv, 1, 0), _fmt(cli, 1, 0),
                    _fmt(figure(result, key, "server_cores"), 1, 2), _fmt(figure(result, key, "client_cores"), 1, 2),
                    _fmt(figure(result, key, "other_cores"), 1, 2), _fmt(ceiling, 1, 0)])
    return out


FIGURE_HEADER = ["case", "server", "c", "throughput (/s)", "p50 (ms)", "GiB/s each way", "server CPU µs/req",
                 "client CPU µs/req", "server cores", "client cores", "other cores", "machine ceiling (/s)"]


def summary(result: dict) -> str:
    lines = ["", f"Wire suite (issue 21): medians over {result['repeats']} repeat(s), {result['elapsed_s']:.0f} s; "
             f"load average {result['load_start']:.2f} -> {result['load_end']:.2f}, other load "
             f"{_fmt(result['other_cores'], 1, 2)} cores"]
    for r in figure_rows(result):
        lines.append(f"  {r[0]:<44} {r[1]:<16} c={r[2]:<4} {r[3]:>9}/s  p50 {r[4]:>7} ms  {r[5]:>5} GiB/s  "
                     f"CPU us/req server {r[6]:>6} client {r[7]:>6}  cores {r[8]}/{r[9]}/{r[10]}")
    if "connfe" in result["rows"]:
        lines.append("  (N front-end processes: ours through `pytriton serve --frontend-processes N`, one instance per "
                     "process; NVIDIA: its default single server, one instance)")
    lines.append("Targets:")
    lines += [f"  {t.line()}" for t in targets(result)] or ["  none for these rows (--wire-rows)"]
    if result["problems"]:
        lines.append("Problems:")
        lines += [f"  {p}" for p in result["problems"]]
    return "\n".join(lines)


def markdown(result: dict) -> str:
    m = result["machine"]
    out = [
        "# Benchmarks: wire (issue 21)", "",
        "Written by `scripts/bench --suite wire` (scripts/bench_lib/wire.py, wire_report.py); do not edit by hand.", "",
        f"{result.get('date', '?')}, commit {result.get('git', '?')}; {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs; "
        f"medians over {result['repeats']} repeat(s), perf_analyzer measurement interval {result['interval_ms']} ms; "
        f"load average {result['load_start']:.2f} at the start, {result['load_end']:.2f} at the end; CPU used by "
        f"other processes during the runs (median) {_fmt(result['other_cores'], 1, 2)} cores; "
        f"{result['elapsed_s'] / 60:.1f} minutes.", "",
        "## Targets", "", "| row | figure | measured | target | met |", "|---|---|---|---|---|",
    ]
    for t in targets(result):
        op = ">=" if t.higher_is_better else "<="
        met = {True: "yes", False: "**no**", None: "not measured"}[t.met]
        out.append(f"| {t.row} | {t.what} | {_fmt(t.value, 1, 2)} | {op} {t.threshold:g} | {met} |")
    out += ["", "## Figures", "", "| " + " | ".join(FIGURE_HEADER) + " |", "|---|---|" + "---:|" * 10]
    out += ["| " + " | ".join(r) + " |" for r in figure_rows(result)]
    out += ["", "## What each row runs", "",
            "- **16 MiB** (`large`): `serve_double.py --batching dynamic --models double_16mib` (y = 2x, "
            "FP32[4194304], PyTriton's default `DynamicBatcher()`, max_batch_size 64, one instance) under each "
            f"package; perf_analyzer at c = {LARGE_CONCURRENCY}, `-b 1`, zero input, over gRPC and HTTP, without "
            "shared memory and through system shared memory. GiB/s each way = 16 MiB x throughput (the request's "
            "tensor in, the answer's out).",
            f"- **16 floats** (`conn`): the same script with `double_small` (FP32[16]); one perf_analyzer run per "
            f"concurrency ({', '.join(map(str, CONN_CONCURRENCIES))}) so that each has its own CPU readings; gRPC "
            "shares a few HTTP/2 connections among perf_analyzer's contexts, HTTP opens one connection per context.",
            f"- **16 floats, N front-end processes** (`connfe`): ours served by `pytriton serve --model-repository R "
            "--frontend-processes N` (N = " + (", ".join(map(str, frontends(result))) or "–") + "; "
            "bench_lib/repo_double.py: the same y = 2x as a Python-backend model, FP32[16], max_batch_size 64, "
            "`dynamic_batching { }` with delay 0, `instance_group` count 1, which each front-end process applies: "
            "one instance per process, N in all), with conn's concurrencies, protocols and CPU readings (the server "
            "tree: the CLI's process, the N front-end processes, their workers). Its ratios divide by NVIDIA's conn "
            "figures from the same run: NVIDIA PyTriton's default single server (one tritonserver, one instance), "
            "which has no such option. They compare ours with N front-end processes against that, not like for like: "
            "ours at N = 1 is the conn row (a bound callable through `serve_double.py`; `--wire-frontends 1` gives "
            "the repository model at N = 1).",
            f"- **Front-end processes** (`multife`, ours only, no target): `scripts/frontend_processes_bench.py`'s "
            "launch, `pytriton serve tests.models:identity` on FP32[16] with `--max-batch-size 64 --dynamic-batching`, "
            "2 workers in every row (N = 1 with `--instances 2`, N = 2 with `--instances 1`), perf_analyzer at "
            f"c = {MULTIFE_CONCURRENCY}. On 2 CPUs a second front-end has no core of its own: see "
            "docs/multi-frontend.md and `scripts/device-bench-multife` for a 16-core machine.",
            "", "How the CPU columns are read: **server CPU** is the utime + stime of the server's whole process tree "
            "(front-end(s), workers; NVIDIA's Python, tritonserver and its stub processes) over one perf_analyzer run, "
            "divided by the inferences the server's statistics counted in it; **client CPU** is perf_analyzer's own "
            "utime + stime over the same run divided by the same count. The cores columns are those CPU seconds over "
            "the run's wall time, and **other cores** what the rest of the machine used meanwhile (all busy time "
            "minus server and client). perf_analyzer runs on the same CPUs as the server, so **machine ceiling** = "
            "CPUs x 10^6 / (server + client µs per request) is the throughput the machine could give this case with "
            "nothing else running and every core busy: a target above it needs a larger machine, not a faster server.",
            ""]
    if result["problems"]:
        out += ["## Problems seen", ""] + [f"- {p}" for p in result["problems"]] + [""]
    return "\n".join(out)
