"""The HTTP route table (`frontend/http/routes.py`) and KServe's table in it (`frontend/http/app.ROUTES`): each path
matched once to one entry, Triton's quirks kept (a model named "stats", a trailing slash, a version that is no
number), and the kept matches bounded."""

from __future__ import annotations

import pytest

from pytriton.frontend.http import routes as routes_module
from pytriton.frontend.http.app import ROUTES, HttpApp
from pytriton.frontend.http.routes import Route, RouteTable


@pytest.mark.parametrize("path, handler, params", [
    ("/v2", HttpApp._server_metadata, {}),
    ("/v2/", HttpApp._server_metadata, {}),
    ("/v2/health/ready", HttpApp._health, {"state": "ready"}),
    ("/v2/models/stats", HttpApp._all_stats, {}),
    ("/v2/models/stats/ready", HttpApp._model_ready, {"model": "stats"}),  # a model named "stats"
    ("/v2/models/m", HttpApp._model_metadata, {"model": "m"}),
    ("/v2/models/m/", HttpApp._model_metadata, {"model": "m"}),
    ("/v2/models/m/versions/3", HttpApp._model_metadata, {"model": "m", "version": "3"}),
    ("/v2/models/m/infer", HttpApp._begin_infer, {"model": "m"}),
    ("/v2/models/a%2Fb/versions/2/infer", HttpApp._begin_infer, {"model": "a/b", "version": "2"}),
    ("/v2/models/m/trace/setting", HttpApp._model_trace, {"model": "m"}),
    ("/v2/models/m/nope", HttpApp._not_found, {"model": "m", "action": ["nope"]}),
    ("/v2/models/m/versions/x/infer", HttpApp._not_found, {"model": "m", "rest": ["x", "infer"]}),
    ("/v2/systemsharedmemory/region/r/register", HttpApp._shared_memory,
     {"region": "r", "kind": "system", "action": "register"}),
    ("/v2/cudasharedmemory/status", HttpApp._shared_memory, {"kind": "cuda", "action": "status"}),
    ("/v2/repository/index", HttpApp._repository, {"rest": ["index"]}),
])
def test_kserve_paths_match_their_route(path, handler, params):
    found = ROUTES.match(path)
    assert found is not None
    route, captured = found
    assert (route.handler or route.begin) is handler and captured == params


@pytest.mark.parametrize("path", ["/v3/models/m/infer", "/models/m/infer", "/v2/models//infer", "/v2/health/x",
                                  "/v2/systemsharedmemory/region/r/x", "v2/models/m"])
def test_other_paths_match_nothing(path):
    assert ROUTES.match(path) is None


def test_a_route_is_one_entry_with_or_without_a_version():
    async def generate(app, request, params):  # pragma: no cover - only matched here
        raise AssertionError

    table = RouteTable()
    route = Route("inference", ("POST",), handler=generate)
    table.add("models/{model}/generate", route, versions=True)
    assert table.match("/v2/models/m/generate") == (route, {"model": "m"})
    assert table.match("/v2/models/m/versions/1/generate") == (route, {"model": "m", "version": "1"})
    assert table.match("/v2/models/m/generate_stream") is None


def test_kept_matches_are_bounded(monkeypatch):
    monkeypatch.setattr(routes_module, "MAX_MATCHES_KEPT", 4)
    table = RouteTable()
    route = Route("metadata", ("GET",), begin=lambda app, request, params: None)
    table.add("models/{model}", route)
    for index in range(10):
        assert table.match(f"/v2/models/m{index}") == (route, {"model": f"m{index}"})
        assert len(table._kept) <= 4
    long_path = "/v2/models/" + "x" * routes_module.MAX_PATH_KEPT
    assert table.match(long_path) is not None and long_path not in table._kept
