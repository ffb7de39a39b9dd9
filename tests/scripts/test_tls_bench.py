"""`scripts/bench --tls` (bench_lib/tls_bench.py): the certificates it makes verify for 127.0.0.1, perf_analyzer gets
the TLS flags, and the table states the difference per request."""

from __future__ import annotations

import dataclasses
import pathlib
import ssl

from bench_lib import perf_analyzer as pa
from bench_lib.cases import Case
from bench_lib.tls_bench import make_certs, table

from tests.scripts.made_results import case_run

OPTS = pa.PaOptions(binary=pathlib.Path("/opt/pa"), interval_ms=1500, max_trials=6, stability=50, timeout_s=120)


def test_certificates_verify_for_the_loopback_address(tmp_path):
    certs = make_certs(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certs["server.pem"], certs["server.key"])
    client = ssl.create_default_context(cafile=str(certs["ca.pem"]))
    client_in, client_out, server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(client_in, client_out, server_hostname="127.0.0.1")
    s = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):  # hand the handshake's bytes back and forth until both sides are done
        done = 0
        for side in (c, s):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if done == 2:
            break
    assert c.version() in ("TLSv1.3", "TLSv1.2")


def test_perf_analyzer_gets_the_extra_flags():
    opts = dataclasses.replace(OPTS, extra_args=["--ssl-grpc-use-ssl", "true", "--ssl-grpc-root-certifications-file",
                                                 "/c/ca.pem"])
    cmd = pa.command(opts, Case("grpc", "small", "none"), 8001, "1", pathlib.Path("/o/r.csv"))
    assert cmd[-4:] == ["--ssl-grpc-use-ssl", "true", "--ssl-grpc-root-certifications-file", "/c/ca.pem"]
    assert "--ssl-grpc-use-ssl" not in pa.command(OPTS, Case("grpc", "small", "none"), 8001, "1",
                                                  pathlib.Path("/o/r.csv"))


def test_table_states_the_cost_per_request():
    plain = {"grpc-small-none": {1: case_run(2000.0, None, p50=400.0)}}
    tls = {"grpc-small-none": {1: case_run(1600.0, None, p50=480.0)}}
    text = table(plain, tls)
    assert "| grpc-small-none | 1 | 2000 | 1600 | 0.80 | 0.400 | 0.480 | +80 | 500 | 500 | +0 |" in text
