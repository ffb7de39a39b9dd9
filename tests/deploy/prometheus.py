"""Debian's prometheus and promtool for the tests of deploy/prometheus: where they are, the alert rules, and a
Prometheus server of the test's own (loopback, a temporary data folder) queried through its HTTP API."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests._support.paths import REPO
from tests._support.processes import started_pids

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULES = PROMETHEUS_DIR / "alerts.yml"
RULE_TESTS = PROMETHEUS_DIR / "alerts_test.yml"
JOB = "pytriton"  # the job of deploy/prometheus/prometheus.yml, which PytritonServerDown selects
TIMEOUT_S = 30.0
NOT_INSTALLED = "{} not found: scripts/install installs Debian's prometheus package when it runs as root with apt-get"


def tool(name: str) -> str:
    """The path of `prometheus` or `promtool`; the test is skipped, saying how to install it, where it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(NOT_INSTALLED.format(name))
    return path


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
            if "alert" in rule]


_COMPARISON = re.compile(r"\s*(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?[0-9][0-9.eE+-]*")


def without_thresholds(expr: str) -> str:
    """The rule's expression with each comparison to a number taken out (`a > 10 and b == 0` -> `a and b`): the
    series the alert looks at, which a healthy server has too."""
    return _COMPARISON.sub("", expr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timestamp(text: str) -> float:
    """Prometheus' RFC 3339 time (`2024-05-01T12:00:00.123456789Z`: up to 9 fraction digits, trailing zeros dropped;
    `Z` or an offset such as `+02:00`) as seconds since the epoch."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    assert match, f"not a Prometheus time: {text!r}"
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    whole = datetime.fromisoformat(match.group(1) + zone).timestamp()
    return whole + float(f"0.{match.group(2) or 0}")


class PrometheusServer:
    """A running `prometheus`, its address on 127.0.0.1 and its log."""

    def __init__(self, process: subprocess.Popen, url: str, log: Path):
        self.process = process
        self.url = url
        self.log_path = log

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, **params: str | list[str]) -> Any:
        """The `data` of an HTTP API answer (status "success" asserted)."""
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=TIMEOUT_S) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # (the API's error answer says what it refused)
            raise AssertionError(f"{path} {params}: {exc.code} {exc.read().decode(errors='replace')}") from None
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The series an instant query returns now (`result` of a vector)."""
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return data["result"]

    def targets(self) -> list[dict[str, Any]]:
        return self.get("/api/v1/targets", state="active")["activeTargets"]

    def wait_until(self, what: str, check: Any, timeout_s: float = TIMEOUT_S) -> Any:
        """Ask `check()` until it returns something true (that is returned); fail naming `what` past the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = check()
            if found:
                return found
            assert self.process.poll() is None, f"prometheus exited with {self.process.returncode}; log:\n{self.log}"
            assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s; log:\n{self.log}"
            time.sleep(0.1)

    def wait_for_scrapes(self, addresses: list[str], since: float) -> None:
        """Until each target at `addresses` has been scraped successfully by a scrape that began after `since`
        (time.time())."""

        def scraped() -> bool:
            fresh = {t["labels"]["instance"] for t in self.targets()
                     if t["health"] == "up" and _timestamp(t["lastScrape"]) > since}
            return set(addresses) <= fresh

        self.wait_until(f"a scrape of {addresses} after the traffic", scraped)


@contextlib.contextmanager
def prometheus(tmp_path: Path, addresses: list[str], rules: Path = RULES) -> Iterator[PrometheusServer]:
    """Prometheus on 127.0.0.1 scraping `addresses` (job pytriton) every second and evaluating `rules` every second,
    its data in `tmp_path`; stopped (by its pid) at the end."""
    binary = tool("prometheus")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": JOB, "metrics_path": "/metrics",
                            "static_configs": [{"targets": addresses}]}],
    }
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log = tmp_path / "prometheus.log"
    for _ in range(3):  # (the free port may have been taken meanwhile)
        address = f"127.0.0.1:{_free_port()}"
        with log.open("w") as out:
            process = subprocess.Popen(
                [binary, f"--config.file={config_path}", f"--storage.tsdb.path={tmp_path / 'data'}",
                 f"--web.listen-address={address}"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
        started_pids.add(process.pid)
        server = PrometheusServer(process, f"http://{address}", log)
        try:
            server.wait_until("prometheus ready", lambda: _ready(server) or process.poll() is not None)
            if process.poll() is not None and "address already in use" in server.log:
                continue
            assert process.poll() is None, f"prometheus exited with {process.returncode}; log:\n{server.log}"
            yield server
            return
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    raise AssertionError(f"prometheus found no free port; log:\n{log.read_text()}")


def _ready(server: PrometheusServer) -> bool:
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=TIMEOUT_S) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError):
        return False
