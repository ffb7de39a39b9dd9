"""TLS settings and start-up errors: a missing, unreadable, non-PEM or mismatched certificate or key fails the start
with an error naming the file (the server context, `pytriton serve`, TritonConfig, tritonfrontend); the handshake
log is rate-limited per client address."""

from __future__ import annotations

import logging
import os
import shutil

import pytest

from pytriton.config.tls import TlsError, TlsSettings
from pytriton.config.triton_config import server_config
from pytriton.exceptions import PyTritonValidationError
from pytriton.frontend.tls import HandshakeLog, server_context
from pytriton.triton import TritonConfig, TritonSecurityConfig
from tests.tls.certs import Certs, make_certs
from tests.tls.cli import serve_to_end

GRPC = ("--grpc-use-ssl", "--grpc-server-cert", "--grpc-server-key", "--grpc-root-cert")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_server_context_loads_and_offers_alpn(certs):
    context = server_context(TlsSettings(certs.server_pem, certs.server_key, certs.ca_pem, mutual=True), ["h2"])
    assert context.verify_mode.name == "CERT_REQUIRED"
    assert context.minimum_version.name == "TLSv1_2"
    plain = server_context(TlsSettings(certs.server_pem, certs.server_key), ["h2"])
    assert plain.verify_mode.name == "CERT_NONE"


def test_start_up_errors_name_the_file(certs, tmp_path):
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(TlsError, match=f"cannot read the server certificate '{missing}': No such file"):
        server_context(TlsSettings(missing, certs.server_key), ["h2"])
    with pytest.raises(TlsError, match=f"cannot read the server key '{missing}'"):
        server_context(TlsSettings(certs.server_pem, missing), ["h2"])
    with pytest.raises(TlsError, match=f"the server certificate '{certs.server_key}' holds no PEM certificate"):
        server_context(TlsSettings(certs.server_key, certs.server_key), ["h2"])
    with pytest.raises(TlsError, match=f"the server key '{certs.server_pem}' holds no PEM private key"):
        server_context(TlsSettings(certs.server_pem, certs.server_pem), ["h2"])
    with pytest.raises(TlsError, match=f"the server key '{certs.client_key}' does not match the server certificate "
                                       f"'{certs.server_pem}'"):
        server_context(TlsSettings(certs.server_pem, certs.client_key), ["h2"])
    with pytest.raises(TlsError, match=f"the root certificate '{certs.ca_key}' holds no PEM certificate"):
        server_context(TlsSettings(certs.server_pem, certs.server_key, certs.ca_key, mutual=True), ["h2"])
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(TlsError, match=f"cannot load the root certificate '{broken}'"):
        server_context(TlsSettings(certs.server_pem, certs.server_key, str(broken), mutual=True), ["h2"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_key_named(certs, tmp_path):
    key = tmp_path / "unreadable.key"
    shutil.copy(certs.server_key, key)
    key.chmod(0)
    with pytest.raises(TlsError, match=f"cannot read the server key '{key}': Permission denied"):
        server_context(TlsSettings(certs.server_pem, str(key)), ["h2"])


def test_settings_need_cert_key_and_for_mutual_a_root():
    assert TlsSettings.of(False, False, None, None, None, GRPC) is None
    with pytest.raises(ValueError, match="--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key"):
        TlsSettings.of(True, False, None, None, None, GRPC)
    with pytest.raises(ValueError, match="mutual TLS needs --grpc-root-cert"):
        TlsSettings.of(False, True, "c.pem", "k.pem", None, GRPC)
    assert TlsSettings.of(False, True, "c.pem", "k.pem", "ca.pem", GRPC) == TlsSettings("c.pem", "k.pem", "ca.pem",
                                                                                        True)


def test_triton_config_fields(certs):
    with pytest.raises(PyTritonValidationError, match="grpc_use_ssl needs grpc_server_cert and grpc_server_key"):
        TritonConfig(grpc_use_ssl=True)
    with pytest.raises(PyTritonValidationError, match="mutual TLS needs http_root_cert"):
        TritonConfig(http_use_ssl_mutual=True, http_server_cert=certs.server_pem, http_server_key=certs.server_key)
    config = TritonConfig(grpc_use_ssl_mutual=True, grpc_server_cert=certs.server_pem, grpc_server_key=certs.server_key,
                          grpc_root_cert=certs.ca_pem, http_use_ssl=True, http_server_cert=certs.server_pem,
                          http_server_key=certs.server_key)
    server = server_config(config, TritonSecurityConfig())
    assert server.grpc_tls == TlsSettings(certs.server_pem, certs.server_key, certs.ca_pem, True)
    assert server.http_tls == TlsSettings(certs.server_pem, certs.server_key, "", False)
    assert type(server).from_json(server.to_json()).grpc_tls == server.grpc_tls
    env = TritonConfig.from_dict({"grpc_use_ssl": "true", "grpc_server_cert": certs.server_pem,
                                  "grpc_server_key": certs.server_key})
    assert server_config(env, TritonSecurityConfig()).grpc_tls == TlsSettings(certs.server_pem, certs.server_key)


def test_cli_start_fails_naming_the_file(certs, tmp_path):
    missing = str(tmp_path / "missing.pem")
    result = serve_to_end("--grpc-use-ssl", "--grpc-server-cert", missing, "--grpc-server-key", certs.server_key)
    assert result.returncode != 0
    assert f"cannot read the server certificate '{missing}'" in result.stderr, result.stderr
    result = serve_to_end("--http-use-ssl", "--http-server-cert", certs.server_pem, "--http-server-key", certs.client_key)
    assert result.returncode != 0
    assert f"the server key '{certs.client_key}' does not match" in result.stderr, result.stderr


@pytest.mark.parametrize("form", [["--grpc-use-ssl"], ["--grpc-use-ssl", "true"], ["--grpc-use-ssl=yes"]])
def test_cli_usage_errors(form):
    """The option alone or with Triton's boolean value; TLS without a certificate is a usage error."""
    result = serve_to_end(*form)
    assert result.returncode == 2
    assert "--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key" in result.stderr, result.stderr


def test_cli_mutual_needs_a_root_certificate(certs):
    result = serve_to_end("--http-use-ssl-mutual", "--http-server-cert", certs.server_pem, "--http-server-key",
                    certs.server_key)
    assert result.returncode == 2
    assert "mutual TLS needs --http-root-cert" in result.stderr, result.stderr


def test_handshake_log_once_per_peer_per_period(caplog):
    now = [100.0]
    log = HandshakeLog(period_s=60.0, max_peers=2, clock=lambda: now[0])
    error = ConnectionResetError("reset")
    with caplog.at_level(logging.WARNING, logger="pytriton.frontend"):
        assert log.failed("gRPC port 1", "10.0.0.1", "10.0.0.1:5", error)
        assert not log.failed("gRPC port 1", "10.0.0.1", "10.0.0.1:6", error)
        assert log.failed("gRPC port 1", "10.0.0.2", "10.0.0.2:5", error)
        assert not log.failed("gRPC port 1", "10.0.0.3", "10.0.0.3:5", error)  # the table is full: not logged
        now[0] += 60.0
        assert log.failed("gRPC port 1", "10.0.0.1", "10.0.0.1:7", error)  # the period passed
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert lines[0] == ("gRPC port 1: TLS handshake with 10.0.0.1:5 failed: reset (further failures from 10.0.0.1 "
                        "are not logged for 60 s)")
