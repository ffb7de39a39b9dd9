"""The Grafana dashboard the deploy tests check (deploy/grafana/pytriton.json) and the decoupled model whose
first-response histogram its panels query (tests/deploy/test_grafana_dashboard.py, test_prometheus_live.py)."""

from __future__ import annotations

from tests._support.paths import REPO
from tests._support.serving import tensor_args

DASHBOARD = REPO / "deploy" / "grafana" / "pytriton.json"
DECOUPLED_ARGS = ["--decoupled", *tensor_args("input", [("COUNT", "int32", "1")]),
                  *tensor_args("output", [("VALUE", "int32", "1")]), "--metrics-config", "histogram_latencies=true"]
"""`pytriton serve tests.models:delayed_countdown` options: a stream of COUNT values, the histogram on."""
