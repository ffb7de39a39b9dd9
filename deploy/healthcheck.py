"""The container's health check: exit 0 when the server's HTTP `/v2/health/ready` answers 200, else 1.

Slim images have no curl; this needs only the Python standard library. The port is PYTRITON_HEALTHCHECK_PORT (default
8000, the server's `--http-port`); the host PYTRITON_HEALTHCHECK_HOST (default 127.0.0.1). Proxy variables
(`http_proxy`, ...) are ignored: the check always asks the server directly. A server started with `--http-use-ssl`
is asked over HTTPS when PYTRITON_HEALTHCHECK_CA names the CA certificate (PEM) its certificate is verified against
(the host name is not checked: the check asks the loopback address); with `--http-use-ssl-mutual`, also give the
client certificate and key in PYTRITON_HEALTHCHECK_CERT and PYTRITON_HEALTHCHECK_KEY.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request


def _setting(name: str, default: str, kind: type[int] | type[float], low: float, high: float) -> int | float:
    """The environment variable `name` as a number in [low, high]; a ValueError with a one-line message if not."""
    text = os.environ.get(name, default)
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {text!r}")
    return value


def main() -> int:
    host = os.environ.get("PYTRITON_HEALTHCHECK_HOST", "127.0.0.1")
    try:
        port = _setting("PYTRITON_HEALTHCHECK_PORT", "8000", int, 1, 65535)
        timeout = _setting("PYTRITON_HEALTHCHECK_TIMEOUT", "3", float, 0.001, 3600)
    except ValueError as exc:
        print(f"pytriton-healthcheck: {exc}", file=sys.stderr)
        return 1
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]  # no proxy, whatever is set
    scheme = "http"
    ca = os.environ.get("PYTRITON_HEALTHCHECK_CA")
    if ca:
        try:
            context = ssl.create_default_context(cafile=ca)
            context.check_hostname = False
            cert = os.environ.get("PYTRITON_HEALTHCHECK_CERT")
            if cert:
                context.load_cert_chain(cert, os.environ.get("PYTRITON_HEALTHCHECK_KEY") or None)
        except (OSError, ssl.SSLError) as exc:
            print(f"pytriton-healthcheck: cannot load the TLS files: {exc}", file=sys.stderr)
            return 1
        handlers.append(urllib.request.HTTPSHandler(context=context))
        scheme = "https"
    url = f"{scheme}://{host}:{port}/v2/health/ready"
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=timeout) as r:
            ready = r.status == 200
    except urllib.error.HTTPError as exc:  # 400: up but not ready (a model is loading or the server stopping)
        print(f"{url}: HTTP {exc.code}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - refused, timed out, a bad host: one line, never a traceback
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
