"""`pytriton serve`'s TLS options: Triton's `--grpc-use-ssl*` / `--grpc-*-cert` / `--grpc-server-key`, and pytriton's
own `--http-*` and `--openai-*` equivalents (Triton has no HTTP TLS, and its OpenAI frontend none). The command
receives them as `grpc_tls`, `http_tls` and `openai_tls` (`TlsSettings`, or None for plain text)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from pytriton.config.tls import TlsSettings

_BOOLEAN: dict[str, Any] = {
    "type": click.BOOL, "is_flag": False, "flag_value": True, "default": False, "metavar": "[BOOLEAN]"
}


def _options_of(service: str, remark: str) -> list[Callable[[Any], Any]]:
    label = {"http": "HTTP", "grpc": "gRPC", "openai": "OpenAI"}[service]
    return [
        click.option(f"--{service}-use-ssl", **_BOOLEAN,
                     help=f"Serve {label} over TLS with --{service}-server-cert and --{service}-server-key "
                          f"({remark}; given alone it means true)."),
        click.option(f"--{service}-use-ssl-mutual", **_BOOLEAN,
                     help=f"Mutual TLS on the {label} port: clients must present a certificate signed by "
                          f"--{service}-root-cert (implies --{service}-use-ssl)."),
        click.option(f"--{service}-server-cert", metavar="FILE",
                     help=f"{label} TLS: the server's certificate (chain), PEM."),
        click.option(f"--{service}-server-key", metavar="FILE", help=f"{label} TLS: the server's private key, PEM."),
        click.option(f"--{service}-root-cert", metavar="FILE",
                     help=f"{label} mutual TLS: the CA certificate(s) client certificates are verified against, PEM."),
    ]


def _settings(service: str, kwargs: dict[str, Any]) -> TlsSettings | None:
    use_ssl, mutual, cert, key, root = (kwargs.pop(f"{service}_{name}") for name in (
        "use_ssl", "use_ssl_mutual", "server_cert", "server_key", "root_cert"))
    names = (f"--{service}-use-ssl", f"--{service}-server-cert", f"--{service}-server-key", f"--{service}-root-cert")
    try:
        return TlsSettings.of(use_ssl, mutual, cert, key, root, options=names)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def tls_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the TLS options to `command`, which receives them as `grpc_tls`, `http_tls` and `openai_tls`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["grpc_tls"] = _settings("grpc", kwargs)
        kwargs["http_tls"] = _settings("http", kwargs)
        kwargs["openai_tls"] = _settings("openai", kwargs)
        return command(*args, **kwargs)

    options = (_options_of("grpc", "as Triton's option") + _options_of("http", "pytriton's own: Triton has no HTTP TLS")
               + _options_of("openai", "pytriton's own"))
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper
