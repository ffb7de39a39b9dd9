"""Raw inference calls the tritonserver 2.51 parity tests make to a model of tests/repositories/triton_parity taking
X (FP32 [1, 1]): over HTTP (JSON) and over gRPC (the generated stub, so that parameters of any kind can be sent)."""

from __future__ import annotations

import http.client
import json
from typing import Any

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

TIMEOUT_S = 60
ANSWERED = "answered"


def http_infer(http_url: str, model: str, parameters: dict[str, Any] | None = None,
               request_id: str | None = None) -> tuple[int, Any]:
    """(status, the first ORDER element where the model has one else ANSWERED) or (status, Triton's error)."""
    body: dict[str, Any] = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}
    if parameters is not None:
        body["parameters"] = parameters
    if request_id is not None:
        body["id"] = request_id
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", f"/v2/models/{model}/infer", json.dumps(body))
        answer = connection.getresponse()
        reply = json.loads(answer.read())
    finally:
        connection.close()
    if answer.status != 200:
        return answer.status, reply.get("error")
    outputs = {output["name"]: output["data"] for output in reply["outputs"]}
    return answer.status, outputs["ORDER"][0] if "ORDER" in outputs else ANSWERED


def grpc_infer(grpc_url: str, model: str, parameters: dict[str, tuple[str, Any]] | None = None,
               request_id: str = "") -> tuple[str, str]:
    """("OK", ANSWERED) or (the status code's name, its details); `parameters`: name -> (the InferParameter field,
    its value)."""
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    tensor = request.inputs.add(name="X", datatype="FP32")
    tensor.shape.extend([1, 1])
    tensor.contents.fp32_contents.extend([1.0])
    for key, (kind, value) in (parameters or {}).items():
        setattr(request.parameters[key], kind, value)
    with grpc.insecure_channel(grpc_url) as channel:
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
    return "OK", ANSWERED
