"""A real Prometheus (Debian's) scrapes running servers: every query of the Grafana dashboard and every alert's
expression returns series through its HTTP API, and the alert rules evaluate cleanly on real data (nothing fires for
healthy servers; a server that does not answer makes PytritonServerDown pending)."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import time
from typing import Any, Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.model_calls import stream_delayed_countdown
from tests._support.serving import serve, tensor_args
from tests.deploy.dashboard import DASHBOARD, DECOUPLED_ARGS
from tests.deploy.prometheus import JOB, PrometheusServer, alert_rules, prometheus, without_thresholds

# identity with the latency summaries (the percentile panels, the queue-time alert) on two faked GPUs (the GPU
# panels); delayed_countdown, decoupled, with the first-response histogram
IDENTITY_ARGS = ["--max-batch-size", "8", *tensor_args("input", [("IN_X", "fp32", "4")]),
                 *tensor_args("output", [("OUT_X", "fp32", "4")]), "--metrics-config", "summary_latencies=true"]
MODELS = ("identity", "delayed_countdown")
# Grafana's built-in variables, as it would fill them in
RATE_INTERVAL = "1m"
RANGE = "1h"


@dataclasses.dataclass
class Setup:
    """The servers' metrics addresses, the address that does not answer, and the Prometheus that scrapes them."""

    servers: list[str]
    silent: str
    prom: PrometheusServer


def _traffic(identity_url: str, streaming_url: str, round_: int) -> None:
    with httpclient.InferenceServerClient(identity_url) as client:
        for i in range(3):
            x = httpclient.InferInput("IN_X", [1, 4], "FP32")
            data = np.full((1, 4), round_ * 10 + i, dtype=np.float32)
            x.set_data_from_numpy(data)
            np.testing.assert_array_equal(client.infer("identity", [x]).as_numpy("OUT_X"), data)
    stream_delayed_countdown(streaming_url, [(0.0, 2)])


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Iterator[Setup]:
    """Two servers scraped every second, with two rounds of requests each seen by a scrape (so that every rate has
    two samples that differ); a third target where nothing answers (a bound port that does not listen)."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    with serve("tests.models:identity", *IDENTITY_ARGS, env=fake_nvml_env(fake_gpus(2))) as identity, \
            serve("tests.models:delayed_countdown", *DECOUPLED_ARGS) as streaming, \
            socket.socket() as silent_socket:
        silent_socket.bind(("127.0.0.1", 0))
        silent = f"127.0.0.1:{silent_socket.getsockname()[1]}"
        servers = [f"127.0.0.1:{s.ports['Metrics Service']}" for s in (identity, streaming)]
        with prometheus(tmp_path, [*servers, silent]) as prom:
            prom.wait_for_scrapes(servers, since=0)
            for round_ in range(2):
                _traffic(identity.http_url, streaming.grpc_url, round_)
                prom.wait_for_scrapes(servers, since=time.time())
            yield Setup(servers, silent, prom)


def _regex(values: list[str]) -> str:
    """A multi-value Grafana variable in a regex matcher: (a|b), each value regex-escaped, the backslashes doubled
    for the PromQL string it lands in."""
    return "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in values) + ")"


def _fill(expr: str, setup: Setup) -> str:
    """The query as Grafana sends it, the Server and Model variables set to the servers and models of the test."""
    variables = {"instance": _regex(setup.servers), "model": _regex(list(MODELS)),
                 "__rate_interval": RATE_INTERVAL, "__range": RANGE}
    for name, value in variables.items():
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert "$" not in expr, f"a variable the test does not fill in: {expr}"
    return expr


def _panel_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every panel target of the dashboard, rows' panels included."""
    found = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            found.extend((panel["title"], t["expr"]) for t in panel.get("targets", []) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return found


def _variable_queries() -> list[tuple[str, str]]:
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    return [(v["name"], v["query"]["query"]) for v in variables if v["type"] == "query"]


PANEL_QUERIES = _panel_queries()


@pytest.mark.parametrize("title,expr", PANEL_QUERIES, ids=[f"{t}:{i}" for i, (t, _) in enumerate(PANEL_QUERIES)])
def test_every_dashboard_query_returns_series(setup, title, expr):
    result = setup.prom.query(_fill(expr, setup))
    assert result, f"panel {title!r}: no series for {_fill(expr, setup)}"
    for series in result:
        assert series["value"][1] not in ("NaN", "+Inf", "-Inf"), (title, series)  # two differing samples each


@pytest.mark.parametrize("name,query", _variable_queries())
def test_every_dashboard_variable_has_values(setup, name, query):
    """`label_values(selector, label)`, evaluated as Grafana does: the label's values among the selected series."""
    match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
    assert match, query
    selector, label = _fill(match.group(1), setup), match.group(2)
    values = setup.prom.get(f"/api/v1/label/{label}/values", **{"match[]": selector})
    expected = setup.servers if label == "instance" else list(MODELS)
    assert sorted(values) == sorted(expected), (name, selector)


ALERTS = alert_rules()


@pytest.mark.parametrize("rule", ALERTS, ids=[r["alert"] for r in ALERTS])
def test_every_alert_expression_returns_series(setup, rule):
    """Its expression without the thresholds returns series for each model (each server for PytritonServerDown),
    with the labels its annotations name."""
    expr = without_thresholds(rule["expr"])
    result = setup.prom.query(expr)
    assert result, f"{rule['alert']}: no series for {expr}"
    referenced = set(re.findall(r"\$labels\.(\w+)", " ".join(rule["annotations"].values())))
    for series in result:
        assert referenced <= set(series["metric"]), (rule["alert"], series["metric"], referenced)
    if rule["alert"] == "PytritonServerDown":
        assert {s["metric"]["instance"] for s in result} == {*setup.servers, setup.silent}
    else:  # (only identity has the latency summaries)
        models = {"identity"} if rule["alert"] == "PytritonHighQueueTime" else set(MODELS)
        assert {s["metric"]["model"] for s in result} == models, rule["alert"]


def test_the_rules_evaluate_and_only_the_silent_target_alerts(setup):
    """Every rule has been evaluated without error; no alert is pending or firing for the healthy servers, and
    PytritonServerDown is pending for the target that does not answer."""
    prom = setup.prom

    def evaluated() -> list[dict[str, Any]]:
        rules = [r for g in prom.get("/api/v1/rules", type="alert")["groups"] for r in g["rules"]]
        # (a rule not evaluated yet has the zero time, 0001-01-01T00:00:00Z)
        done = all(not r["lastEvaluation"].startswith("0001-") for r in rules) and any(
            a["labels"]["alertname"] == "PytritonServerDown" for r in rules for a in r["alerts"])
        return rules if done else []

    rules = prom.wait_until("every alert rule evaluated and PytritonServerDown pending", evaluated)
    assert sorted(r["name"] for r in rules) == sorted(r["alert"] for r in ALERTS)
    for r in rules:
        assert r["health"] == "ok", (r["name"], r.get("lastError"))
    alerts = [(a["labels"]["alertname"], a["labels"].get("job"), a["labels"].get("instance"), a["state"])
              for r in rules for a in r["alerts"]]
    assert alerts == [("PytritonServerDown", JOB, setup.silent, "pending")]  # (its `for`, 1 minute, not over)
