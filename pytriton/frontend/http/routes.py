"""The HTTP front-end's route table: a request's path is matched once, against one entry per route.

An entry is a path pattern under `/v2` and a `Route`: the endpoint group the client's access is checked against
(`--http-restricted-api`), the methods it takes (others: 405), and its handler. Patterns are segments separated by
`/`: a literal segment; `{name}` (any one non-empty segment); `{version}` (one segment of digits); `{*name}` (all
the segments left, none too). Literal segments are tried first, then `{version}`, then `{name}`, then `{*name}`,
with backtracking: `models/stats` is the statistics route and `models/stats/ready` the readiness of a model named
"stats". Segments are percent-decoded before they are matched; one trailing `/` is ignored.

A route answered without a coroutine (the infer route: its call's future answers it, `infer_begin.py`) has `begin`;
any other has `handler`, a coroutine function. Adding a route is adding an entry (`RouteTable.add`), e.g.

    table.add("models/{model}/generate", Route("inference", ("POST",), handler=generate), versions=True)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

Params = dict[str, Any]


class Route:
    """One route: `group` (None: no access check), `methods` (others are answered 405), `handler(app, request,
    params)` (a coroutine function) or `begin(app, request, params)` (answers at once or with a pending answer), and
    `method_first`: the method is checked before the client's access (Triton's order on some routes); `params`:
    fixed captures the handler gets too (one handler for several routes). An empty `methods` takes any method."""

    __slots__ = ("group", "methods", "handler", "begin", "method_first", "params")

    def __init__(self, group: str | None, methods: tuple[str, ...],
                 handler: Callable[..., Awaitable[Any]] | None = None, begin: Callable[..., Any] | None = None,
                 method_first: bool = False, params: Params | None = None):  # fmt: skip
        assert (handler is None) != (begin is None), "a route has a handler or a begin"
        self.group = group
        self.methods = methods
        self.handler = handler
        self.begin = begin
        self.method_first = method_first
        self.params = params


class _Node:
    __slots__ = ("literal", "version", "name", "rest", "route")

    def __init__(self) -> None:
        self.literal: dict[str, _Node] = {}
        self.version: tuple[str, _Node] | None = None  # {version}: digits
        self.name: tuple[str, _Node] | None = None  # {name}: any non-empty segment
        self.rest: tuple[str, Route] | None = None  # {*name}: the rest
        self.route: Route | None = None  # the route that ends here


MAX_MATCHES_KEPT = 256
MAX_PATH_KEPT = 256  # longer paths are matched each time (at most 64 KiB of kept paths)


class RouteTable:
    """Routes by path pattern (see the module's docstring). The matches of the last paths seen are kept by path (at
    most `MAX_MATCHES_KEPT` paths of at most `MAX_PATH_KEPT` characters, then they are dropped all at once): clients
    ask the same few paths again and again."""

    def __init__(self, prefix: str = "v2"):
        self.prefix = prefix
        self._root = _Node()
        self._kept: dict[str, tuple[Route, Params]] = {}

    def add(self, pattern: str, route: Route, versions: bool = False) -> None:
        """Add `route` at `pattern`; `versions`: also at the pattern with `/versions/{version}` after its `{model}`."""
        self._add([s for s in pattern.split("/") if s], route)
        if versions:
            segments = pattern.split("/")
            at = segments.index("{model}") + 1
            self._add([s for s in (*segments[:at], "versions", "{version}", *segments[at:]) if s], route)

    def _add(self, segments: list[str], route: Route) -> None:
        node = self._root
        for index, segment in enumerate(segments):
            if segment.startswith("{*"):
                assert index == len(segments) - 1, "{*name} is the last segment"
                node.rest = (segment[2:-1], route)
                return
            if segment == "{version}":
                if node.version is None:
                    node.version = ("version", _Node())
                node = node.version[1]
            elif segment.startswith("{"):
                if node.name is None:
                    node.name = (segment[1:-1], _Node())
                assert node.name[0] == segment[1:-1], "one capture name per position"
                node = node.name[1]
            else:
                node = node.literal.setdefault(segment, _Node())
        node.route = route
        self._kept.clear()

    def match(self, path: str) -> tuple[Route, Params] | None:
        """The route of `path` and what its pattern captured (not to be changed: it may be kept), or None (404)."""
        kept = self._kept.get(path)
        if kept is not None:
            return kept
        found = self._match(path)
        if found is not None and len(path) <= MAX_PATH_KEPT:
            if len(self._kept) >= MAX_MATCHES_KEPT:
                self._kept.clear()
            self._kept[path] = found
        return found

    def _match(self, path: str) -> tuple[Route, Params] | None:
        parts = path.split("/")
        if "%" in path:
            parts = [unquote(p) for p in parts]
        if len(parts) < 2 or parts[0] or parts[1] != self.prefix:
            return None
        segments = parts[2:]
        if len(segments) > 1 and segments[-1] == "":
            segments.pop()
        if len(segments) == 1 and not segments[0]:
            segments = []
        params: Params = {}
        route = _match(self._root, segments, 0, params)
        if route is None:
            return None
        if route.params:
            params.update(route.params)
        return route, params


def _match(node: _Node, segments: list[str], index: int, params: Params) -> Route | None:
    if index == len(segments):
        if node.route is not None:
            return node.route
        if node.rest is not None:
            params[node.rest[0]] = []
            return node.rest[1]
        return None
    segment = segments[index]
    child = node.literal.get(segment)
    if child is not None and (found := _match(child, segments, index + 1, params)) is not None:
        return found
    if segment:
        if node.version is not None and segment.isdigit():
            if (found := _match(node.version[1], segments, index + 1, params)) is not None:
                params["version"] = segment
                return found
        if node.name is not None and (found := _match(node.name[1], segments, index + 1, params)) is not None:
            params[node.name[0]] = segment
            return found
    if node.rest is not None:
        params[node.rest[0]] = segments[index:]
        return node.rest[1]
    return None


__all__ = ["Params", "Route", "RouteTable"]
