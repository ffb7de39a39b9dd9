"""A server's Prometheus page (`ServerProcess.metrics_url`)."""

from __future__ import annotations

import urllib.request
from typing import Any


def scrape(server: Any, timeout_s: float = 10.0) -> str:
    """The metrics page's text; the page answers 200 with Prometheus's text format."""
    with urllib.request.urlopen(server.metrics_url, timeout=timeout_s) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()
