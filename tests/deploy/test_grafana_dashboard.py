"""Every metric the Grafana dashboard (deploy/grafana/pytriton.json) queries exists on /metrics of a running server,
with the labels its selectors use."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.metrics import scrape
from tests._support.model_calls import stream_delayed_countdown
from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args
from tests.deploy.dashboard import DASHBOARD, DECOUPLED_ARGS

METRICS_REFERENCE = REPO / "docs" / "guide" / "metrics.md"  # its "Reference" table
# Labels Prometheus adds to every series from its target, not the server.
TARGET_LABELS = {"instance", "job"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
            "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_TOKEN = re.compile(r"(?P<duration>(?:\d+(?:ms|[smhdwy]))+(?![\w.]))|(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<variable>\$\{?\w+\}?)"
                    r"|(?P<name>[A-Za-z_:][\w:]*)|(?P<open>\()|(?P<brace>\{[^}]*\})|(?P<range>\[[^\]]*\])|(?P<other>\S)")


def promql_selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names its matchers use) of every selector in a PromQL expression (or a Grafana
    `label_values(metric{...}, label)` query): not functions, keywords, grouping labels or Grafana variables."""
    strings: list[str] = []
    text = _STRING.sub(lambda m: strings.append(m.group()) or '""', expr)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text)]
    found = []
    for i, (kind, value) in enumerate(tokens):
        if kind != "name" or value in KEYWORDS:
            continue
        following = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if following[0] == "open":
            continue  # a function or an aggregation
        labels = set()
        if following[0] == "brace":
            labels = {m.group(1) for m in re.finditer(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", following[1])}
        found.append((value, labels))
    if expr.lstrip().startswith("label_values("):  # label_values(metric, label): the label is no metric
        found = found[:1]
    return found


def test_promql_selectors():
    assert promql_selectors(
        'histogram_quantile(0.99, sum by (le, model) (rate(foo_bucket{model=~"$model", le!="+Inf"}[$__rate_interval])))'
        ' / on (model) group_left bar_total offset 5m > 1e3') == [("foo_bucket", {"model", "le"}), ("bar_total", set())]
    assert promql_selectors('label_values(nv_x{instance=~"$instance"}, model)') == [("nv_x", {"instance"})]
    assert promql_selectors('max without (gpu_uuid) (a:b:rate5m{quantile="0.5"}) and ${x}') == [
        ("a:b:rate5m", {"quantile"})]


def dashboard_selectors() -> list[tuple[str, set[str]]]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(panels):
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            exprs.append(query["query"])
        elif variable["type"] == "query":
            exprs.append(query)
    assert len(exprs) > 20
    selectors = [s for e in exprs for s in promql_selectors(e)]
    assert selectors
    return selectors


def test_dashboard_is_importable_json():
    """A data source chosen at import (`${datasource}`), the model picked from the label's values."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["model"]["query"]["query"].startswith("label_values(")
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def _series(text: str) -> dict[str, set[str]]:
    """{sample name: label names} of a /metrics page (as the lines name them, `_count`/`_sum` included)."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = re.match(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})? ", line)
            assert match, line
            labels = {p.split("=", 1)[0] for p in match.group(2).split(",")} if match.group(2) else set()
            out.setdefault(match.group(1), set()).update(labels)
    return out


def _check(selectors: list[tuple[str, set[str]]], series: dict[str, set[str]]) -> None:
    for name, labels in selectors:
        assert name in series, f"the dashboard queries {name}, which /metrics does not have"
        missing = labels - TARGET_LABELS - series[name]
        assert not missing, f"the dashboard selects {name} by {missing}, labels it does not have"


def _traffic_and_scrape(server) -> str:
    with httpclient.InferenceServerClient(server.http_url) as client:
        for i in range(3):
            x = httpclient.InferInput("IN_X", [1, 4], "FP32")
            x.set_data_from_numpy(np.full((1, 4), i, dtype=np.float32))
            client.infer("identity", [x])
    return scrape(server)


SERVER_ARGS = ["--max-batch-size", "8", *tensor_args("input", [("IN_X", "fp32", "4")]),
               *tensor_args("output", [("OUT_X", "fp32", "4")]), "--metrics-config", "summary_latencies=true",
               "--cache-config", "local,size=1048576", "--response-cache"]  # (the nv_cache_* families too)


@pytest.fixture(scope="module")
def metrics_page() -> str:
    """/metrics of two servers after a few requests, one after the other: a model with the summaries and the response
    cache on, and a decoupled one with the first-response histogram on."""
    with serve("tests.models:identity", *SERVER_ARGS) as server:
        page = _traffic_and_scrape(server)
    with serve("tests.models:delayed_countdown", *DECOUPLED_ARGS) as server:
        stream_delayed_countdown(server.grpc_url, [(0.0, 2)])
        page += scrape(server)
    return page


def test_every_dashboard_metric_is_served(metrics_page):
    _check([s for s in dashboard_selectors() if not s[0].startswith("nv_gpu_")], _series(metrics_page))


def test_the_metrics_reference_lists_every_metric(metrics_page):
    """docs/guide/metrics.md's reference table names each family on /metrics, with its type."""
    documented = dict(re.findall(r"^\| `([a-z_:]+)` \| (counter|gauge|summary|histogram) \|",
                                 METRICS_REFERENCE.read_text(), re.MULTILINE))
    served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", metrics_page, re.MULTILINE))
    assert served and served.items() <= documented.items(), set(served.items()) - set(documented.items())
    undocumented_gpu = {n for n in documented if n.startswith(("nv_gpu_", "nv_energy_"))}
    assert set(documented) - set(served) == undocumented_gpu  # those need a GPU (test below where one is faked)


def _documented_labels() -> dict[str, set[str]]:
    """The reference table's Labels column, per metric family ("—": none)."""
    rows = re.findall(r"^\| `([a-z_:]+)` \| [a-z]+ \| ([^|]+) \|", METRICS_REFERENCE.read_text(), re.MULTILINE)
    return {name: {label.strip() for label in labels.split(",")} - {"—", ""} for name, labels in rows}


def _served_label_sets(page: str) -> dict[str, set[frozenset[str]]]:
    """Family -> the label-name sets of its samples (a summary's or histogram's _count, _sum and _bucket samples
    belong to their family)."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", page, re.MULTILINE))
    found: dict[str, set[frozenset[str]]] = {}
    for name, labels in re.findall(r"^([a-z_:]+)(?:\{([^}]*)\})? \S+$", page, re.MULTILINE):
        family = name
        for suffix in ("_count", "_sum", "_bucket"):
            base = name.removesuffix(suffix)
            if name.endswith(suffix) and types.get(base) in ("summary", "histogram"):
                family = base
        names = frozenset(re.findall(r'([a-zA-Z_]\w*)="', labels))
        found.setdefault(family, set()).add(names)
    return found


def _check_labels(page: str) -> None:
    documented = _documented_labels()
    for family, label_sets in _served_label_sets(page).items():
        for names in label_sets:
            # _count and _sum samples have no quantile / le label
            assert names in (documented[family], documented[family] - {"quantile", "le"}), (family, set(names),
                                                                                           documented[family])


def test_the_metrics_reference_gives_the_served_labels(metrics_page):
    """Each sample on /metrics carries exactly the labels the reference lists for its metric (the worker metrics'
    kind, gpu and gpu_uuid included)."""
    assert 'kind="KIND_CPU",gpu="",gpu_uuid=""' in metrics_page
    _check_labels(metrics_page)


def test_every_dashboard_gpu_metric_is_served():
    selectors = [s for s in dashboard_selectors() if s[0].startswith("nv_gpu_")]
    assert {name for name, _ in selectors} == {"nv_gpu_utilization", "nv_gpu_memory_used_bytes",
                                               "nv_gpu_memory_total_bytes"}
    # GPU discovery faked (tests/_fake_nvml first on PYTHONPATH, two GPUs); the metrics are read as with real NVML
    with serve("tests.models:identity", *SERVER_ARGS, env=fake_nvml_env(fake_gpus(2))) as server:
        text = _traffic_and_scrape(server)
    series = _series(text)
    _check(selectors, series)
    assert "gpu_uuid" in series["nv_gpu_utilization"]
    documented = set(re.findall(r"^\| `([a-z_:]+)` \|", METRICS_REFERENCE.read_text(), re.MULTILINE))
    assert set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE)) <= documented
    _check_labels(text)  # the nv_gpu_* metrics' gpu_uuid; a GPU instance's kind, gpu and gpu_uuid
