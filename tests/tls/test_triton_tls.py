"""`TritonConfig` TLS fields through `Triton`: grpc_use_ssl_mutual (PyTriton's fields) and http_use_ssl (pytriton's
own) reach the server process; tritonclient with the right certificates gets answers; a bad key fails the start
naming the file."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from pytriton.exceptions import PyTritonRuntimeError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS
from tests.tls.certs import http_context_factory, make_certs


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def _bind(triton: Triton) -> None:
    triton.bind("double", double, inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)], config=ModelConfig(batching=False))


def test_triton_config_tls(tmp_path):
    certs = make_certs(tmp_path)
    config = TritonConfig(grpc_use_ssl_mutual=True, grpc_server_cert=certs.server_pem,
                          grpc_server_key=certs.server_key, grpc_root_cert=certs.ca_pem, http_use_ssl=True,
                          http_server_cert=certs.server_pem, http_server_key=certs.server_key, **FREE_PORTS)
    with Triton(config=config) as triton:
        _bind(triton)
        triton.run()
        with grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}", ssl=True,
                                              root_certificates=certs.ca_pem, private_key=certs.client_key,
                                              certificate_chain=certs.client_pem) as client:
            tensor = grpcclient.InferInput("x", [1], "FP32")
            tensor.set_data_from_numpy(np.array([1.5], dtype=np.float32))
            assert client.infer("double", [tensor]).as_numpy("y").tolist() == [3.0]
        with grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}", ssl=True,
                                              root_certificates=certs.ca_pem) as client:
            with pytest.raises(grpcclient.InferenceServerException, match="UNAVAILABLE"):
                client.is_server_live()  # mutual: no client certificate, no answer
        client = httpclient.InferenceServerClient(f"127.0.0.1:{triton.ports['http']}", ssl=True,
                                                  ssl_context_factory=http_context_factory(certs))
        try:
            tensor = httpclient.InferInput("x", [1], "FP32")
            tensor.set_data_from_numpy(np.array([2.0], dtype=np.float32))
            assert client.infer("double", [tensor]).as_numpy("y").tolist() == [4.0]
        finally:
            client.close()


def test_triton_start_fails_naming_the_key(tmp_path):
    certs = make_certs(tmp_path)
    config = TritonConfig(grpc_use_ssl=True, grpc_server_cert=certs.server_pem, grpc_server_key=certs.client_key,
                          **FREE_PORTS)
    with pytest.raises(PyTritonRuntimeError, match=f"the server key '{certs.client_key}' does not match"):
        with Triton(config=config) as triton:  # the server starts here (launch_triton_on_startup)
            _bind(triton)
            triton.run()
