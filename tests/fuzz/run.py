"""Run fuzz harnesses with atheris (libFuzzer), one child process per harness (`scripts/fuzz` is the entry point).

    python -m tests.fuzz.run [--seconds N | --runs N] [--seed S] [--out DIR] [harness ...]

Each harness starts from its seeds (`tests/fuzz/corpus/<harness>/`, read only) and keeps what libFuzzer adds in
`<out>/<harness>/corpus/`. A finding (see `harness.check`) is saved as `<out>/<harness>/findings/<signature>.bin`
with a `.txt` beside it, and fuzzing goes on: a run reports every distinct finding, not only the first. libFuzzer's
own stops also count as findings and leave their input in the same folder: an input still running after `-timeout`
(a hang, wall clock) or the process's RSS past `-rss_limit_mb`. The exit status is 1 when any harness found
something, 2 when a harness could not run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

from tests.fuzz.harness import CORPUS, HARNESSES, SHM_PREFIX, check, corpus_files, load, sampled, save_finding, watch_errors

REPO = Path(__file__).resolve().parents[2]
HANG_TIMEOUT_S = 10  # libFuzzer's -timeout: a hang backstop (wall clock); `harness.TIME_LIMIT_S` is the CPU check
RSS_LIMIT_MB = 2048
# The fuzzing process's address space may grow this much past what it holds once set up and warmed up (RLIMIT_AS):
# an input that allocates more (a buffer sized by what a client declares) fails with MemoryError, a finding.
ADDRESS_SPACE_HEADROOM = 768 << 20
INSTRUMENT = {  # what atheris instruments for coverage, by harness (pure-Python parsers the harness goes through)
    "h2": ("pytriton", "hpack"),
    "model_config": ("pytriton", "google.protobuf.text_format", "google.protobuf.json_format"),
    "repository": ("pytriton", "google.protobuf.json_format"),
}


def child(name: str, out: Path, seconds: int | None, runs: int | None, seed: int) -> None:
    """Fuzz one harness in this process (atheris exits the process at the end)."""
    import atheris  # noqa: PLC0415 - only the fuzzing child needs it

    with atheris.instrument_imports(include=list(INSTRUMENT.get(name, ("pytriton",)))):
        harness = load(name)
    harness.setup()
    watch_errors()
    seeds = corpus_files(name)
    for path in seeds:  # warm-up: first-use imports and caches are not charged to the first inputs
        check(harness, path.read_bytes())
    limit_address_space()
    findings = out / "findings"
    findings.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()

    def one_input(data: bytes) -> None:
        result = check(harness, data, trace=sampled(data))
        if result.finding is not None:
            save_finding(findings, name, data, result)
            if result.signature not in seen:
                seen.add(result.signature)
                print(f"FINDING {name}: {result.signature}", file=sys.stderr, flush=True)

    work = out / "corpus"
    work.mkdir(parents=True, exist_ok=True)
    args = [sys.argv[0], str(work), *([str(CORPUS / name)] if seeds else []),
            f"-max_len={harness.max_len}", f"-timeout={HANG_TIMEOUT_S}", f"-rss_limit_mb={RSS_LIMIT_MB}",
            f"-seed={seed}", f"-artifact_prefix={findings}/", "-print_final_stats=1"]
    dictionary = CORPUS.parent / "dict" / f"{name}.dict"
    if dictionary.is_file():
        args.append(f"-dict={dictionary}")
    if runs is not None:
        args.append(f"-runs={runs}")
    if seconds is not None:
        args.append(f"-max_total_time={seconds}")
    atheris.Setup(args, one_input)
    atheris.Fuzz()


def limit_address_space() -> None:
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + ADDRESS_SPACE_HEADROOM, resource.RLIM_INFINITY))


_COV = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)/")


def _stats(log: str) -> dict[str, int]:
    stats = {}
    for key, pattern in (("executions", r"stat::number_of_executed_units: (\d+)"),
                         ("exec_per_s", r"stat::average_exec_per_sec: +(\d+)"),
                         ("peak_rss_mb", r"stat::peak_rss_mb: +(\d+)")):
        match = re.search(pattern, log)
        if match:
            stats[key] = int(match.group(1))
    last = _COV.findall(log)
    if last:
        stats["coverage"], stats["features"], stats["corpus"] = (int(v) for v in last[-1])
    return stats


def run_harness(name: str, out: Path, seconds: int | None, runs: int | None, seed: int) -> dict:
    """Fuzz `name` in a child process; what it did (its log is `<out>/<name>/fuzz.log`)."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "tests.fuzz.run", "--child", name, "--out", str(folder), "--seed", str(seed)]
    if seconds is not None:
        command += ["--seconds", str(seconds)]
    if runs is not None:
        command += ["--runs", str(runs)]
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED="0")
    limit = (seconds or 0) + 300
    log_path = folder / "fuzz.log"
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            returncode = child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            returncode = -1
        finally:
            # libFuzzer ends the child with C's exit(): Python's clean-up never runs there, so what a harness made
            # outside its process is removed here (shm_register's segment, named by the child's pid)
            Path(f"/dev/shm/{SHM_PREFIX}{child.pid:08d}").unlink(missing_ok=True)
    text = log_path.read_text(errors="replace")
    findings_dir = folder / "findings"
    found = sorted(p.name for p in findings_dir.iterdir()) if findings_dir.is_dir() else []
    inputs = [f for f in found if not f.endswith(".txt")]
    signatures = sorted(set(re.findall(r"^FINDING [^:]+: (.*)$", text, re.M)))
    signatures += [f"libFuzzer stop: {f}" for f in inputs if f.split("-")[0] in ("timeout", "oom", "crash", "leak",
                                                                                 "slow")]
    result = {"harness": name, "seconds": seconds, "runs": runs, "returncode": returncode, **_stats(text),
              "findings": signatures, "findings_dir": str(findings_dir), "log": str(log_path)}
    if returncode not in (0,) and not signatures:
        result["error"] = f"the fuzzing process ended with status {returncode}; see {log_path}"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    public = [h for h in HARNESSES if not h.startswith("_")]
    parser.add_argument("harnesses", nargs="*", metavar="harness", help=f"any of {', '.join(public)} (default all)")
    parser.add_argument("--seconds", type=int, help="fuzz each harness this long (default 60, unless --runs)")
    parser.add_argument("--runs", type=int, help="fuzz each harness this many inputs (seeds included)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed (default 1)")
    parser.add_argument("--out", type=Path, help="output folder (default .fuzz/<UTC time>)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        assert args.out is not None
        child(args.child, args.out, args.seconds, args.runs, args.seed)
        return 0  # not reached: atheris exits
    unknown = [h for h in args.harnesses if h not in HARNESSES]
    if unknown:
        parser.error(f"unknown harness {', '.join(unknown)} (known: {', '.join(HARNESSES)})")
    seconds = args.seconds if args.seconds is not None or args.runs is not None else 60
    out = args.out or REPO / ".fuzz" / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    print(f"[fuzz] output: {out}", flush=True)
    results = []
    for name in args.harnesses or public:
        result = run_harness(name, out, seconds, args.runs, args.seed)
        results.append(result)
        print(f"[fuzz] {name}: {result.get('executions', '?')} executions "
              f"({result.get('exec_per_s', '?')}/s), coverage {result.get('coverage', '?')} edges "
              f"({result.get('features', '?')} features, corpus {result.get('corpus', '?')}), "
              f"{len(result['findings'])} finding(s)" + (f" in {result['findings_dir']}" if result["findings"] else "")
              + (f" -- {result['error']}" if "error" in result else ""), flush=True)
        for signature in result["findings"]:
            print(f"[fuzz]   finding: {signature}", flush=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"[fuzz] summary: {out / 'summary.json'}", flush=True)
    if any(r["findings"] for r in results):
        return 1
    return 2 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
