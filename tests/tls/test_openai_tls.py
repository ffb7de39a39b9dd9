"""TLS and mutual TLS on the OpenAI port (`--openai-use-ssl`, `--openai-use-ssl-mutual`; pytriton's own options),
through the official `openai` client over its httpx2: completions whole and streamed over TLS; a plain-text client and, with
mutual TLS, clients without the right certificate are refused while the right one goes on being served; the HTTP
port keeps its own setting; the settings through TritonConfig and the command line; and the warning when an API key
would cross the network in plain text."""

from __future__ import annotations

import ssl

import httpx2
import openai
import pytest
import requests

from pytriton.config.tls import TlsSettings
from pytriton.config.triton_config import server_config
from pytriton.exceptions import PyTritonValidationError
from pytriton.triton import TritonConfig, TritonSecurityConfig
from tests._support.serving import serve
from tests.tls.certs import Certs, make_certs
from tests.tls.cli import serve_to_end

KEY = "sk-tls-test-key"
PLAIN_TEXT_WARNING = "without TLS every client's key crosses the network in plain text"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _tls_args(certs: Certs) -> list[str]:
    return ["--openai-server-cert", certs.server_pem, "--openai-server-key", certs.server_key]


@pytest.fixture(scope="module")
def tls_server(certs):
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--openai-use-ssl", *_tls_args(certs),
               env={"PYTRITON_OPENAI_API_KEY": KEY}) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(certs):
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--openai-use-ssl-mutual", "true",
               *_tls_args(certs), "--openai-root-cert", certs.ca_pem) as server:
        yield server


def _base_url(server, scheme: str = "https") -> str:
    return f"{scheme}://127.0.0.1:{server.ports['OpenAIService']}/v1"


def _client(server, certs: Certs, client_cert: str | None = None) -> openai.OpenAI:
    context = ssl.create_default_context(cafile=certs.ca_pem)
    if client_cert is not None:
        context.load_cert_chain(getattr(certs, f"{client_cert}_pem"), getattr(certs, f"{client_cert}_key"))
    return openai.OpenAI(base_url=_base_url(server), api_key=KEY, max_retries=0, timeout=30,
                         http_client=httpx2.Client(verify=context, timeout=30))


def test_completions_over_tls_whole_and_streamed(tls_server, certs):
    with _client(tls_server, certs) as client:
        assert [m.id for m in client.models.list().data] == ["pieces"]
        answer = client.completions.create(model="pieces", prompt="one two", max_tokens=3, extra_body={"pieces": 10})
        assert answer.choices[0].text == "p0 p1 p2 "
        stream = client.chat.completions.create(model="pieces", messages=[{"role": "user", "content": "hi"}],
                                                stream=True, extra_body={"pieces": 4})
        pieces = [chunk.choices[0].delta.content for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
        assert pieces == ["p0 ", "p1 ", "p2 ", "p3 "]
    assert PLAIN_TEXT_WARNING not in tls_server.log


def test_a_plain_text_client_is_refused_and_the_http_port_keeps_plain_text(tls_server, certs):
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{_base_url(tls_server, 'http')}/models", headers={"Authorization": f"Bearer {KEY}"},
                     timeout=10)
    # (the OpenAI port's TLS is its own: the KServe HTTP port of the same server still speaks plain text)
    assert requests.get(f"http://{tls_server.http_url}/v2/health/ready", timeout=10).status_code == 200
    with _client(tls_server, certs) as client:  # still served after the refused client
        assert client.models.retrieve("pieces").id == "pieces"


def test_mutual_tls_refuses_clients_without_the_right_certificate(mtls_server, certs):
    for client_cert in (None, "other_client"):
        with _client(mtls_server, certs, client_cert) as client, pytest.raises(openai.APIConnectionError):
            client.models.list()
    with _client(mtls_server, certs, "client") as client:
        answer = client.completions.create(model="pieces", prompt="x", max_tokens=2, extra_body={"pieces": 5})
        assert answer.choices[0].text == "p0 p1 "


def test_an_api_key_on_a_plain_text_port_open_to_the_network_is_warned_about():
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--openai-address", "0.0.0.0",
               env={"PYTRITON_OPENAI_API_KEY": KEY}) as server:
        assert PLAIN_TEXT_WARNING in server.log
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--openai-address", "127.0.0.1",
               env={"PYTRITON_OPENAI_API_KEY": KEY}) as server:
        assert PLAIN_TEXT_WARNING not in server.log


def test_triton_config_fields(certs):
    with pytest.raises(PyTritonValidationError, match="openai_use_ssl needs openai_server_cert and openai_server_key"):
        TritonConfig(openai_port=0, openai_use_ssl=True)
    with pytest.raises(PyTritonValidationError, match="mutual TLS needs openai_root_cert"):
        TritonConfig(openai_use_ssl_mutual=True, openai_server_cert=certs.server_pem,
                     openai_server_key=certs.server_key)
    config = TritonConfig(openai_port=0, openai_use_ssl_mutual=True, openai_server_cert=certs.server_pem,
                          openai_server_key=certs.server_key, openai_root_cert=certs.ca_pem)
    server = server_config(config, TritonSecurityConfig())
    assert server.openai_tls == TlsSettings(certs.server_pem, certs.server_key, certs.ca_pem, True)
    assert server.http_tls is None
    assert type(server).from_json(server.to_json()).openai_tls == server.openai_tls


def test_cli_usage_errors(certs):
    result = serve_to_end("--openai-port", "0", "--openai-use-ssl")
    assert result.returncode == 2
    assert "--openai-use-ssl needs --openai-server-cert and --openai-server-key" in result.stderr, result.stderr
    result = serve_to_end("--openai-port", "0", "--openai-use-ssl-mutual", *_tls_args(certs))
    assert result.returncode == 2
    assert "mutual TLS needs --openai-root-cert" in result.stderr, result.stderr
