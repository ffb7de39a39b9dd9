"""What every fuzz harness shares: the checks made on each input, and the list of harnesses.

A harness feeds one input to one parser that faces the network or model authors and decides what the parser may do
with it: accept it, or refuse it with its own error (each harness says which). `check` adds what holds for all:

* nothing but the parser's own errors escapes (anything else is a finding, with its traceback);
* no input takes more than `TIME_LIMIT_S` of CPU time (`time.process_time`, so that a busy machine does not make a
  finding; a real hang is stopped by libFuzzer's `-timeout`, see `run.py`);
* no input makes Python allocate more than the harness's bound at any moment: the peak of what `tracemalloc` traces
  while the input runs (every allocation made through Python's allocators, numpy's arrays included; not memory that
  C libraries get from malloc themselves, such as protobuf's arenas). Tracing every allocation makes an input about
  four times slower, so a fuzzing run traces one input in `TRACE_ONE_IN` (chosen by the input's CRC, so a finding
  replays) and bounds the rest by the address-space limit `run.py` sets (an allocation past it raises MemoryError,
  which is a finding like any other error); replays (the test suite, a finding's input) trace every input.

Harness modules are imported by name (`load`), so that the runner can instrument them for coverage first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import itertools
import logging
import os
import re
import time
import traceback
import tracemalloc
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

TIME_LIMIT_S = 1.0
TRACE_ONE_IN = 8
CORPUS = Path(__file__).parent / "corpus"
REPO = Path(__file__).resolve().parents[2]

# name -> "module:class"; `scripts/fuzz` runs them in this order (but those whose name starts with "_").
HARNESSES = {
    "http1": "tests.fuzz.http1:Http1Harness",
    "h2": "tests.fuzz.h2:H2Harness",
    "grpc_infer": "tests.fuzz.grpc_infer:GrpcInferHarness",
    "http_infer": "tests.fuzz.http_infer:HttpInferHarness",
    "shm_register": "tests.fuzz.shm_register:ShmRegisterHarness",
    "repository": "tests.fuzz.repository:RepositoryHarness",
    "model_config": "tests.fuzz.model_config:ModelConfigHarness",
    "trace_config": "tests.fuzz.cli_configs:TraceConfigHarness",
    "metrics_config": "tests.fuzz.cli_configs:MetricsConfigHarness",
    "cache_config": "tests.fuzz.cli_configs:CacheConfigHarness",
    "_selftest": "tests.fuzz.selftest:SelfTestHarness",  # (the runner's own test; not run by default)
}


SHM_PREFIX = "fuzz_"  # a harness's shared-memory segment: this, then its process id in 8 digits

class Finding(Exception):
    """A harness's own check failed (not an escaped error): `kind` names the check, and is the finding's signature."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class Harness:
    """One parser under fuzzing. Subclasses set the class attributes and `one_input`."""

    name = ""
    instrument: tuple[str, ...] = ("pytriton",)  # packages atheris instruments for coverage
    max_len = 4096  # longest input libFuzzer makes
    memory_fixed = 4 << 20  # allocation bound: this much plus `memory_per_byte` per input byte
    memory_per_byte = 16

    def setup(self) -> None:
        """Once per process, before the first input."""

    def one_input(self, data: bytes) -> None:
        """Parse `data`. Return when the parser accepted it or refused it with its own error; raise `Finding` for a
        result the harness finds wrong; any other exception escaping is a finding too."""
        raise NotImplementedError

    def memory_bound(self, data: bytes) -> int:
        return self.memory_fixed + self.memory_per_byte * len(data)

    def close(self) -> None:
        """Release what `setup` made (event loops, files, shared-memory segments)."""


def load(name: str) -> Harness:
    module_name, _, class_name = HARNESSES[name].partition(":")
    harness: Harness = getattr(importlib.import_module(module_name), class_name)()
    return harness


class _ErrorLog(logging.Handler):
    """Error records logged while an input runs: a server that catches a bug and logs it (an HTTP handler's 500, an
    HTTP/2 connection closed with INTERNAL_ERROR) did not refuse the input with its own error."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_error_log = _ErrorLog()


@dataclasses.dataclass
class Result:
    """What one input did: a finding (None: none), its signature, and the measures."""

    finding: str | None
    signature: str
    cpu_s: float
    peak_bytes: int


def _where(exc: BaseException) -> str:
    """The innermost frame of `exc`'s traceback in pytriton (else the innermost frame): file:line, from the repository
    root (or the file's name, outside it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/pytriton/" in f.filename] or frames
    if not ours:
        return "?"
    frame = ours[-1]
    path = Path(frame.filename)
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    return f"{shown}:{frame.lineno}"


def watch_errors() -> None:
    """Hear the errors logged while inputs run (once per process, before `check`)."""
    logger = logging.getLogger()
    if _error_log not in logger.handlers:
        logger.addHandler(_error_log)


def sampled(data: bytes) -> bool:
    """Whether a fuzzing run traces this input's allocations (the same input always gets the same answer)."""
    return zlib.crc32(data) % TRACE_ONE_IN == 0


def check(harness: Harness, data: bytes, trace: bool = True) -> Result:
    """Run one input under the common checks (`watch_errors` first); `trace`: measure its allocations."""
    _error_log.records.clear()
    if trace:
        tracemalloc.start(1)
    start = time.process_time()
    finding = signature = None
    try:
        harness.one_input(data)
    except Finding as exc:
        finding, signature = str(exc), exc.kind
    except Exception as exc:  # noqa: BLE001 - whatever escaped is the finding
        finding = "".join(traceback.format_exception(exc))
        signature = f"{type(exc).__name__} at {_where(exc)}"
    cpu_s = time.process_time() - start
    peak = 0
    if trace:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if finding is None and _error_log.records:
        record = _error_log.records[0]
        finding = f"logged an error: {record.getMessage()}\n" + (
            "".join(traceback.format_exception(*record.exc_info)) if record.exc_info else "")
        signature = f"error logged at {os.path.basename(record.pathname)}:{record.lineno}"
    if finding is None and cpu_s > TIME_LIMIT_S:
        finding, signature = f"took {cpu_s:.2f} s of CPU (limit {TIME_LIMIT_S} s)", "slow input"
    bound = harness.memory_bound(data)
    if finding is None and trace and peak > bound:
        finding = f"allocated {peak} bytes at its peak (bound {bound} for {len(data)} input bytes)"
        signature = "allocation past the bound"
    _error_log.records.clear()
    return Result(finding, signature or "", cpu_s, peak)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80].strip("_")


def save_finding(folder: Path, harness: str, data: bytes, result: Result) -> Path:
    """Write the input and what it did under `folder` (one file pair per signature: the first input found)."""
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha1(result.signature.encode()).hexdigest()[:10]
    path = folder / f"{slug(result.signature)}-{key}.bin"
    if not path.exists():
        path.write_bytes(data)
        path.with_suffix(".txt").write_text(
            f"harness: {harness}\nsignature: {result.signature}\ninput: {path.name} ({len(data)} bytes, "
            f"sha1 {hashlib.sha1(data).hexdigest()})\n\n{result.finding}\n")
    return path


# Read sizes a transport harness cuts an input into, in turn (from a place that depends on the input): every boundary
# falls somewhere, a CRLF CRLF or a frame header is split, and an input of 8 KiB still takes only ~250 reads.
READ_SIZES = (1, 3, 2, 7, 1, 64, 5, 13, 2, 256, 4, 9, 1, 31)


def read_sizes(data: bytes) -> Iterator[int]:
    """The sizes of the reads that deliver `data` in pieces (the same for the same input)."""
    return itertools.islice(itertools.cycle(READ_SIZES), zlib.crc32(data) % len(READ_SIZES), None)


def corpus_files(name: str) -> list[Path]:
    folder = CORPUS / name
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def replay(harness: Harness, files: list[Path], on_result: Callable[[Path, Result], Any]) -> None:
    for path in files:
        on_result(path, check(harness, path.read_bytes()))
