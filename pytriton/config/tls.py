"""A port's TLS settings (`TlsSettings`) as options give them, and the error of a setting that cannot be used.
The handshake and the server's `ssl.SSLContext` are the front-ends' (`pytriton.frontend.tls`)."""

from __future__ import annotations

import dataclasses
from typing import Any


class TlsError(OSError):
    """A TLS setting that cannot be used (a certificate or key that cannot be read or does not match): the
    server does not start. The message names the file."""


@dataclasses.dataclass
class TlsSettings:
    """A port's TLS: the server's certificate (chain) and key, PEM files; with `mutual`, clients must present a
    certificate that `root_cert` (PEM, one or more CA certificates) verifies."""

    server_cert: str
    server_key: str
    root_cert: str = ""
    mutual: bool = False

    @classmethod
    def of(cls, use_ssl: bool | None, mutual: bool | None, cert: Any, key: Any, root: Any,
           options: tuple[str, str, str, str]) -> TlsSettings | None:  # fmt: skip
        """The settings from a front-end's options (None: no TLS); `mutual` implies TLS, as in Triton.
        `options` names the use-ssl, cert, key and root options in errors. Raises ValueError."""
        if not (use_ssl or mutual):
            return None
        use_option, cert_option, key_option, root_option = options
        missing = [name for name, value in ((cert_option, cert), (key_option, key)) if not value]
        if missing:
            raise ValueError(f"{use_option} needs {' and '.join(missing)} (PEM files)")
        if mutual and not root:
            raise ValueError(f"mutual TLS needs {root_option}: the CA certificate(s) that client certificates must "
                             "be signed by")
        return cls(str(cert), str(key), str(root) if root else "", bool(mutual))


__all__ = ["TlsError", "TlsSettings"]
