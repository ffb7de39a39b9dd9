"""The server process's event loop (pytriton.server.process.run_loop, PYTRITON_EVENT_LOOP): uvloop's where it is installed and
no port serves TLS, asyncio's own when asked or when a port serves TLS; an impossible choice fails before starting."""

from __future__ import annotations

import asyncio
import builtins
import sys

import pytest

from pytriton.config.server import ServerConfig
from pytriton.config.tls import TlsSettings
from pytriton.server import process

uvloop = pytest.importorskip("uvloop")
TLS = TlsSettings("server.pem", "server.key")


def _loop_kind(config: ServerConfig) -> str:
    seen: list[str] = []

    async def main() -> None:
        seen.append("uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio")

    process.run_loop(config, main())
    return seen[0]


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({}, "uvloop"),  # auto, no TLS
        ({"event_loop": "uvloop"}, "uvloop"),
        ({"event_loop": "asyncio"}, "asyncio"),
        ({"grpc_tls": TLS}, "asyncio"),  # auto with a TLS port
        ({"http_tls": TLS, "event_loop": "asyncio"}, "asyncio"),
    ],
)
def test_the_loop_a_config_gets(fields, expected):
    assert _loop_kind(ServerConfig(models=[], **fields)) == expected


def test_uvloop_asked_for_a_tls_port_fails_before_starting():
    started = []

    async def main() -> None:
        started.append(True)

    with pytest.raises(RuntimeError, match="PYTRITON_EVENT_LOOP=uvloop cannot serve a TLS port"):
        process.run_loop(ServerConfig(models=[], http_tls=TLS, event_loop="uvloop"), main())
    assert not started


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch):
    real_import = builtins.__import__

    def no_uvloop(name, *args, **kwargs):
        if name == "uvloop":
            raise ImportError("no module named uvloop")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "uvloop")
    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert _loop_kind(ServerConfig(models=[])) == "asyncio"
    with pytest.raises(RuntimeError, match="uvloop is not installed"):
        _loop_kind(ServerConfig(models=[], event_loop="uvloop"))
