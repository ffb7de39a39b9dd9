"""One of several front-end processes (`pytriton serve --frontend-processes N`, see docs/multi-frontend.md).

Each process counts what it serves. So that a client still sees one server, every process listens on a private
loopback port of its own (known to all, reserved by the parent before any of them started) where the others read its
statistics (`/local/stats`) and metrics (`/local/metrics`); a request for them carries the group's secret token. The
statistics extension answers the sum over all processes; the metrics port, served by process 0 alone, the sum of the
per-model families (the machine-wide nv_cpu_* / nv_gpu_* gauges are read once, by process 0).

Client shared-memory registrations and unregistrations are ordered by process 0: a process that receives one asks
process 0 (`/local/order`) to run it; process 0 runs one at a time, in arrival order, applying it to itself and then
sending it to every other process (`/local/shm`, the receiving one included), so that every process applies them
in the same order and the answer is the one a single server gives (the first of two registrations of a name wins).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import secrets
import urllib.parse
from typing import Any

from pytriton.config.http1 import HttpLimits, KiB
from pytriton.core.peers import apply_shm
from pytriton.core.server_core import ServerCore
from pytriton.exceptions import ServerError, Status
from pytriton.frontend.http1 import HttpListener, HttpRequest, HttpResponse, error_response
from pytriton.frontend.metrics.collector import CONTENT_TYPE, render_metrics
from pytriton.frontend.metrics.server import MetricsApp

logger = logging.getLogger("pytriton.server")

TOKEN_ENV = "PYTRITON_FRONTEND_PEER_TOKEN"  # the group's secret, given to its processes in their environment
TOKEN_HEADER = "x-pytriton-peer-token"
# Tests only: a folder where every shared-memory order a process receives from a peer waits, after leaving a file
# `held-<index>-<n>` there, until a file `release` appears in it (a race between two processes made deterministic).
GATE_ENV = "PYTRITON_TEST_PEER_ORDER_GATE"
PEER_TIMEOUT_S = 5.0
# How long a process waits for process 0 to run a shared-memory order: the orders queued before it, its own sending
# to every process and the undo of a refused registration (each bounded by PEER_TIMEOUT_S).
ORDER_TIMEOUT_S = 6 * PEER_TIMEOUT_S
# The private ports carry small orders and answers between the group's processes: a body past 64 KiB (a client's
# huge upload, without or with a token) is dropped as it comes (413), and a head must arrive at once.
PEER_LIMITS = HttpLimits(max_input_bytes=64 * KiB, max_header_bytes=8 * KiB, max_header_count=32,
                         header_timeout_s=PEER_TIMEOUT_S, body_timeout_s=PEER_TIMEOUT_S, idle_timeout_s=30.0,
                         max_buffered_bytes=4 * 64 * KiB)
NOT_LISTENING, SILENT = 0, -1  # _request's status when no answer came: nothing listens; connected, no answer in time
LAST_ANSWERS_KEPT = 1024  # (peer, path) pairs whose last answer is kept (statistics of each model version, metrics)
ACTIONS = {"register", "unregister"}
KINDS = {"system", "cuda"}
MACHINE_WIDE = ("nv_cpu_", "nv_gpu_", "nv_energy_")  # gauges of the machine: read once, never summed
LONGEST = ("pytriton_model_execution_stall_seconds",)  # gauges of a duration: the longest of the processes, not a sum
LOCKED = ("cannot be changed while the server runs as several front-end processes (--frontend-processes): each "
          "process holds its own")


class FrontendPeers:
    """This process's place in the group: its peer listener and the way to its peers' statistics and metrics."""

    def __init__(self, core: ServerCore, index: int, ports: list[int], token: str):
        self.core = core
        self.index = index
        self.ports = ports  # every process's private port, this one's included (at `index`)
        self.token = token
        self._token_bytes = token.encode()
        self._last: dict[tuple[int, str], bytes] = {}  # each peer's last answer per path: used when it is silent
        self.local_metrics: MetricsApp | None = None
        self.listener: HttpListener | None = None
        self._gate = os.environ.get(GATE_ENV) or None
        self._held = itertools.count()
        self._order_lock = asyncio.Lock()  # process 0: one shared-memory order at a time, in arrival order

    @classmethod
    def of(cls, core: ServerCore, index: int, ports: list[int]) -> FrontendPeers | None:
        """None unless this process is one of several front-end processes (`ports` given)."""
        if not ports:
            return None
        token = os.environ.get(TOKEN_ENV, "")
        if not token:
            raise RuntimeError(f"a front-end process needs the group's token in {TOKEN_ENV}")
        return cls(core, index, ports, token)

    async def start(self, local_metrics: MetricsApp | None) -> HttpListener:
        """Listen on this process's private port (SO_REUSEPORT: the parent holds it bound, not listening)."""
        self.local_metrics = local_metrics
        self.listener = HttpListener(self._handle, "127.0.0.1", self.ports[self.index],
                                     f"front-end peer service {self.index}", protocol="front-end peers",
                                     limits=PEER_LIMITS, reuse_port=True)
        await self.listener.start()
        return self.listener

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        # (bytes: compare_digest refuses str with non-ASCII characters; headers are latin-1 text)
        given = request.headers.get(TOKEN_HEADER, "").encode("latin-1", "replace")
        if not secrets.compare_digest(given, self._token_bytes):
            return error_response(403, "Forbidden")
        if request.path == "/local/metrics" and self.local_metrics is not None:
            return HttpResponse(200, [render_metrics(self.local_metrics.registry)], [("Content-Type", CONTENT_TYPE)])
        if request.path in ("/local/shm", "/local/order") and request.method == "POST":
            order = _order(bytes(request.body))
            if order is None:
                return error_response(400, "malformed shared-memory order")
            if request.path == "/local/order" and self.index != 0:
                return error_response(400, "shared-memory orders are run by front-end process 0")
            await self._wait_at_gate()
            try:
                if request.path == "/local/order":  # another process asks process 0 to run a client's order
                    await self._ordered(order["action"], order["kind"], order["name"], order["args"])
                else:  # process 0 sends an order it runs
                    apply_shm(self.core, order["action"], order["kind"], order["name"], order["args"])
            except ServerError as exc:
                body = json.dumps({"error": exc.message, "status": exc.status.name}).encode()
                return HttpResponse(400, [body], [("Content-Type", "application/json")])
            return HttpResponse(200)
        if request.path == "/local/stats":
            query = urllib.parse.parse_qs(request.query)
            try:
                stats = self.core.statistics(query.get("name", [""])[0], query.get("version", [""])[0])
            except Exception as exc:  # noqa: BLE001 - the asking process answered its own error already
                return error_response(400, str(exc))
            return HttpResponse(200, [json.dumps(stats).encode()], [("Content-Type", "application/json")])
        return error_response(404, "Not Found")

    async def _wait_at_gate(self) -> None:
        """Tests only (GATE_ENV): hold a peer's order until the test releases it."""
        if self._gate is None:
            return
        with open(os.path.join(self._gate, f"held-{self.index}-{next(self._held)}"), "w"):
            pass
        while not os.path.exists(os.path.join(self._gate, "release")):
            await asyncio.sleep(0.01)

    async def shm(self, action: str, kind: str, name: str, args: list[Any]) -> None:
        """ServerCore.peers.shm: a client's order, run by process 0 in every process (this one included)."""
        if self.index == 0:
            await self._ordered(action, kind, name, args)
            return
        body = json.dumps({"action": action, "kind": kind, "name": name, "args": args}).encode()
        status, answer = await self._request(self.ports[0], "/local/order", body, ORDER_TIMEOUT_S)
        if status == 200:
            return
        if status == 400:
            raise _refusal(answer)
        what = "registration" if action == "register" else "unregistration"
        why = {NOT_LISTENING: "is not listening", SILENT: f"did not answer within {ORDER_TIMEOUT_S:g} s"}.get(
            status, f"answered {status}")
        undone = ""
        if action == "register" and status != NOT_LISTENING:  # (process 0 may still run it: undone after it)
            undo = json.dumps({"action": "unregister", "kind": kind, "name": name, "args": []}).encode()
            await self._request(self.ports[0], "/local/order", undo, ORDER_TIMEOUT_S)
            undone = "; the registration was undone"
        raise ServerError(Status.UNAVAILABLE, f"front-end process 0 {why} to the {what} of shared memory region "
                                              f"'{name[:200]}'{undone}")

    async def _ordered(self, action: str, kind: str, name: str, args: list[Any]) -> None:
        """Process 0: run one order, after those that came before it: applied here, then in every other process
        (a registration that one refuses undone everywhere). Shielded: a client that goes away meanwhile does not
        leave it half applied."""
        async def run() -> None:
            async with self._order_lock:
                apply_shm(self.core, action, kind, name, args)
                try:
                    await self._broadcast(action, kind, name, args)
                except BaseException:
                    if action == "register":
                        apply_shm(self.core, "unregister", kind, name, [])
                    raise

        task = asyncio.ensure_future(run())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # (read even when no one awaits it)
        await asyncio.shield(task)

    async def _broadcast(self, action: str, kind: str, name: str, args: list[Any]) -> None:
        """Process 0: the order applied in every other process, a refused registration undone there."""
        body = json.dumps({"action": action, "kind": kind, "name": name, "args": args}).encode()
        others = [(i, port) for i, port in enumerate(self.ports) if i != self.index]
        answers = await asyncio.gather(*(self._request(port, "/local/shm", body) for _, port in others))
        refusals = [text for status, text in answers if status == 400]
        failed = [(i, status) for (i, _), (status, _) in zip(others, answers)
                  if status not in (200, 400, NOT_LISTENING)]
        if action != "register" or (not refusals and not failed):
            return  # (an unregistration a silent process has not confirmed reaches it when it reads its orders)
        # undone wherever it may be applied: where it was, and where the order may still be read (a stopped process)
        undo_at = [port for (_, port), (status, _) in zip(others, answers) if status not in (400, NOT_LISTENING)]
        undo = json.dumps({"action": "unregister", "kind": kind, "name": name, "args": []}).encode()
        await asyncio.gather(*(self._request(port, "/local/shm", undo) for port in undo_at))
        if refusals:
            raise _refusal(refusals[0])
        index, status = failed[0]
        why = f"did not answer within {PEER_TIMEOUT_S:g} s" if status == SILENT else f"answered {status}"
        raise ServerError(Status.UNAVAILABLE, f"front-end process {index} {why} to the registration of shared memory "
                                              f"region '{name[:200]}'; the registration was undone")

    async def _get_all(self, path: str) -> list[tuple[int, bytes]]:
        """GET `path` from every other process: (its index, the body). One that is not listening (not started yet,
        gone: it serves no connection either) is left out. One that does not answer within the timeout (stopped,
        overloaded), or answers an error, counts with its last answer to `path`, so that counters never go back (a
        scraper would read a reset); without one, ServerError UNAVAILABLE naming it (an answer without its share
        would be wrong)."""
        others = [(i, port) for i, port in enumerate(self.ports) if i != self.index]
        answers = await asyncio.gather(*(self._request(port, path) for _, port in others))
        found = []
        for (i, _), (status, answer) in zip(others, answers):
            if status == 200:
                if len(self._last) < LAST_ANSWERS_KEPT or (i, path) in self._last:
                    self._last[(i, path)] = answer
                found.append((i, answer))
            elif status != NOT_LISTENING:  # silent, or an error of its own
                last = self._last.get((i, path))
                why = f"did not answer within {PEER_TIMEOUT_S:g} s" if status == SILENT else f"answered {status}"
                if last is None:
                    raise ServerError(Status.UNAVAILABLE, f"front-end process {i} {why}; its share cannot be counted")
                logger.warning("front-end process %d %s to %s: its last answer is used", i, why, path)
                found.append((i, last))
        return found

    async def _request(self, port: int, path: str, body: bytes | None = None,
                       timeout_s: float = PEER_TIMEOUT_S) -> tuple[int, bytes]:
        """GET (or POST `body`) `path` of the process on `port`: (status, body); status NOT_LISTENING when nothing
        listens there or it closed unanswered (not started yet, gone), SILENT when it took no answer within
        `timeout_s` (stopped, overloaded: it may still read the order later)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), PEER_TIMEOUT_S)
        except asyncio.TimeoutError:
            logger.warning("front-end process on port %d took no connection for %s", port, path)
            return SILENT, b""
        except OSError:
            return NOT_LISTENING, b""
        method = "GET" if body is None else "POST"
        try:
            writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                         f"Content-Length: {len(body or b'')}\r\n{TOKEN_HEADER}: {self.token}\r\n\r\n".encode()
                         + (body or b""))
            data = await asyncio.wait_for(reader.read(), timeout_s)
        except asyncio.TimeoutError:
            logger.warning("front-end process on port %d did not answer %s within %g s", port, path, timeout_s)
            return SILENT, b""
        except OSError as exc:
            logger.warning("front-end process on port %d did not answer %s: %s", port, path, exc)
            return NOT_LISTENING, b""
        finally:
            writer.close()
        head, _, answer = data.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1:2]
        if status != [b"200"]:
            logger.warning("front-end process on port %d answered %s with %r", port, path, head[:80])
        return int(status[0]) if status and status[0].isdigit() else NOT_LISTENING, answer

    async def statistics(self, name: str, version: str) -> list[list[dict[str, Any]]]:
        """The other processes' `model_stats` entries (ServerCore.peer_statistics)."""
        query = urllib.parse.urlencode({"name": name, "version": version})
        return [json.loads(body) for _, body in await self._get_all(f"/local/stats?{query}")]

    def metrics_handler(self, local: MetricsApp) -> Any:
        """The metrics port's handler (process 0): this process's metrics with the others' added in."""

        async def handle(request: HttpRequest) -> HttpResponse:
            response = await local.handle(request)
            if response.status != 200:
                return response
            texts = [(self.index, b"".join(bytes(p) for p in response.parts).decode())]
            try:
                texts += [(index, body.decode()) for index, body in await self._get_all("/local/metrics")]
            except ServerError as exc:  # (a scrape without a process's share would read as a counter reset)
                return error_response(503, exc.message)
            return HttpResponse(200, [merge_metrics(texts).encode()], response.headers)

        return handle


def _refusal(text: bytes) -> ServerError:
    """The ServerError a peer refused a registration with (its 400 answer)."""
    try:
        answer = json.loads(text)
        return ServerError(Status[answer["status"]], answer["error"])
    except (ValueError, KeyError, TypeError):
        return ServerError(Status.INTERNAL, f"a front-end process refused the registration: {text[:200]!r}")


def _order(body: bytes) -> dict[str, Any] | None:
    """A peer's shared-memory order, checked: None when it is not one."""
    try:
        order = json.loads(body)
    except ValueError:
        return None
    if (not isinstance(order, dict) or order.get("action") not in ACTIONS or order.get("kind") not in KINDS
            or not isinstance(order.get("name"), str) or not isinstance(order.get("args"), list)):
        return None
    return order


def merge_metrics(texts: list[tuple[int, str]]) -> str:
    """Prometheus text of several processes (index, text) as one: families in order of first appearance (HELP/TYPE
    from the first), samples with the same name and labels summed (the LONGEST gauges: their largest value), the
    machine-wide gauges taken from the first text only; a sample of one model instance (an `instance` label: each
    process has its own instances of the same names) gets the process's index as a `frontend` label instead of being
    summed."""
    families: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
    owner: dict[str, int] = {}  # the text whose HELP/TYPE lines a family keeps
    for position, (index, text) in enumerate(texts):
        family = None
        for line in text.splitlines():
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    if owner.setdefault(family, position) == position:
                        families.setdefault(family, ([], {}))[0].append(line)
                continue
            if not line.strip() or family is None or (position > 0 and family.startswith(MACHINE_WIDE)):
                continue
            key, _, value = line.rpartition(" ")
            if 'instance="' in key and key.endswith("}"):
                key = f'{key[:-1]},frontend="{index}"}}'
            families[family][1].setdefault(key, []).append(value)
    lines = []
    for family, (head, samples) in families.items():
        lines += head
        combine = _largest if family in LONGEST else _sum
        lines += [f"{key} {combine(values)}" for key, values in samples.items()]
    return "\n".join(lines) + "\n"


def _largest(values: list[str]) -> str:
    return max(values, key=float)


def _sum(values: list[str]) -> str:
    try:
        return str(sum(int(v) for v in values))
    except ValueError:
        total = float(sum(float(v) for v in values))
        return str(int(total)) if total.is_integer() and abs(total) < 2**53 else repr(total)
