"""The container's health check: exit 0 when the server's HTTP `/v2/health/ready` answers 200, else 1.

Slim images have no curl; this needs only the Python standard library. The port is PYTRITON_HEALTHCHECK_PORT (default
8000, the server's `--http-port`); the host PYTRITON_HEALTHCHECK_HOST (default 127.0.0.1).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    host = os.environ.get("PYTRITON_HEALTHCHECK_HOST", "127.0.0.1")
    port = os.environ.get("PYTRITON_HEALTHCHECK_PORT", "8000")
    url = f"http://{host}:{port}/v2/health/ready"
    try:
        with urllib.request.urlopen(url, timeout=float(os.environ.get("PYTRITON_HEALTHCHECK_TIMEOUT", "3"))) as r:
            ready = r.status == 200
    except urllib.error.HTTPError as exc:  # 400: up but not ready (a model is loading or the server stopping)
        print(f"{url}: HTTP {exc.code}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # refused, timed out, a bad port in the environment
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
