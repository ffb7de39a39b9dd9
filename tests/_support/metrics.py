"""A server's Prometheus page (`ServerProcess.metrics_url`)."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

SAMPLE_RE = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (\S+)$')
"""One sample line: name, labels, value."""


def scrape(server: Any, timeout_s: float = 30.0) -> str:
    """The metrics page's text (`server`: a ServerProcess or the page's URL); it answers 200 with Prometheus's text
    format."""
    url = server if isinstance(server, str) else server.metrics_url
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()


def metric_sum(server: Any, name: str, label: str = "") -> float:
    """The sum of `name`'s samples whose labels contain `label` (all of them when empty)."""
    pattern = rf"^{name}\{{[^}}]*{label}[^}}]*\}} (\S+)$"
    return sum(float(v) for v in re.findall(pattern, scrape(server), re.M))


def pending_requests(server: Any) -> float:
    """`nv_inference_pending_request_count` summed over the models."""
    return metric_sum(server, "nv_inference_pending_request_count")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(name, sorted labels): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE_RE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        pairs = tuple(sorted(tuple(p.split("=", 1)) for p in labels.split(","))) if labels else ()
        out[(name, tuple((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out
