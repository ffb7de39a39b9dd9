"""Test certificates made with the `openssl` command: a CA with a server certificate (127.0.0.1, localhost) and a
client certificate, and another CA with a client certificate of its own (which the server must refuse)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import gevent.ssl


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key_and_csr(name: str, subject: str, cwd: Path) -> None:
    _run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)


def _ca(name: str, cwd: Path) -> None:
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN=pytriton test {name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=cwd)


def _signed(name: str, ca: str, extensions: str, cwd: Path) -> None:
    _key_and_csr(name, f"/CN=pytriton test {name}", cwd)
    (cwd / f"{name}.ext").write_text(extensions + "\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
         "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=cwd)


@dataclasses.dataclass
class Certs:
    folder: Path

    def __getattr__(self, name: str) -> str:  # ca_pem, server_key, client_pem, other_client_key, ...
        stem, _, kind = name.rpartition("_")
        return str(self.folder / f"{stem}.{kind}")


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    _ca("ca", folder)
    _ca("other_ca", folder)
    _signed("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth", folder)
    _signed("client", "ca", "extendedKeyUsage=clientAuth", folder)
    _signed("other_client", "other_ca", "extendedKeyUsage=clientAuth", folder)
    return Certs(folder)


def http_context_factory(certs: Certs, client: str | None = None):  # noqa: ANN201
    """For tritonclient.http's `ssl_context_factory`: trust `certs`' CA; present the `client` certificate if named."""
    def factory(cafile=None):  # geventhttpclient passes its own cafile (None here)
        context = gevent.ssl.create_default_context(cafile=certs.ca_pem)
        if client is not None:
            context.load_cert_chain(getattr(certs, f"{client}_pem"), getattr(certs, f"{client}_key"))
        return context
    return factory
