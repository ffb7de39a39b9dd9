"""The benchmark's cases: protocol x tensor size x shared memory (x dynamic batching), and which to run."""

from __future__ import annotations

import dataclasses

SIZES = {"small": ("double_small", 16), "1mib": ("double_1mib", 262144),  # size -> (model, floats per request)
         "16mib": ("double_16mib", 4194304)}  # run only when named (--cases): large messages
SIZE_LABEL = {"small": "16 floats", "1mib": "1 MiB", "16mib": "16 MiB"}
SERVER_LABEL = {"ours": "pytriton (ours)", "nvidia": "NVIDIA PyTriton",
                "repo": "pytriton (ours), repository model"}
MAIN_MODELS = [SIZES[s][0] for s in ("small", "1mib")]  # served by the main launch
BATCHED_MODELS = ["double_small"]  # served by the dynamic-batching launch


@dataclasses.dataclass(frozen=True)
class Case:
    """One perf_analyzer configuration; `key` names it in options, results and file names."""

    protocol: str  # grpc | http
    size: str  # small | 1mib | 16mib
    shm: str  # none | system
    batching: str = "off"  # off | dynamic

    @property
    def model(self) -> str:
        return SIZES[self.size][0]

    @property
    def batched(self) -> bool:
        return self.batching != "off"

    @property
    def key(self) -> str:
        return f"{self.protocol}-{self.size}-{self.shm}" + ("-batched" if self.batched else "")

    @property
    def label(self) -> str:
        shm = "system shm" if self.shm == "system" else "no shm"
        batched = ", dynamic batching" if self.batched else ""
        return f"{'gRPC' if self.protocol == 'grpc' else 'HTTP'}, {SIZE_LABEL[self.size]}, {shm}{batched}"


def full_matrix() -> list[Case]:
    return [Case(p, s, m) for s in ("small", "1mib") for p in ("grpc", "http") for m in ("none", "system")]


def quick_matrix() -> list[Case]:
    return [Case("grpc", "small", "none"), Case("http", "small", "none"), Case("grpc", "1mib", "none"),
            Case("http", "1mib", "system")]


BATCHED_CASES = [Case("grpc", "small", "none", "dynamic"), Case("http", "small", "none", "dynamic")]
# 16 MiB, chosen by key only (e.g. --cases grpc-16mib-none-batched,http-16mib-system-batched)
LARGE_CASES = [Case(p, "16mib", m, b) for p in ("grpc", "http") for m in ("none", "system") for b in ("off", "dynamic")]


def models_of(cases: list[Case], base: list[str]) -> list[str]:
    """The models a launch serves: `base`, and the 16 MiB model when a case needs it."""
    return base + [m for m in dict.fromkeys(c.model for c in cases) if m not in base and m == SIZES["16mib"][0]]


def select_cases(quick: bool, no_batching: bool, keys: str | None) -> tuple[list[Case], list[Case]]:
    """(main-launch cases, batching-launch cases) for the options; `keys` (comma-separated) overrides both.

    Raises:
        ValueError: a key that names no case.
    """
    if keys:
        wanted = set(keys.split(","))
        unknown = wanted - {c.key for c in full_matrix() + BATCHED_CASES + LARGE_CASES}
        if unknown:
            raise ValueError(f"unknown case(s): {sorted(unknown)}")
        return ([c for c in full_matrix() + LARGE_CASES if c.key in wanted and not c.batched],
                [c for c in BATCHED_CASES + LARGE_CASES if c.key in wanted and c.batched])
    cases = quick_matrix() if quick else full_matrix()
    return cases, [] if (quick or no_batching) else list(BATCHED_CASES)


def expand_range(spec: str) -> list[int]:
    """The concurrencies of a perf_analyzer --concurrency-range `start[:end[:step]]` (end included)."""
    parts = [int(x) for x in spec.split(":")]
    if len(parts) == 1:
        return parts
    start, end = parts[0], parts[1]
    step = parts[2] if len(parts) > 2 else 1
    return list(range(start, end + 1, step))
