"""REPORT = what the pb_utils call named by the request parameter "case" gives (a repr, or the exception's type and
words), in Triton's own API, so that tritonserver 2.51 runs it too (tests/e2e/test_triton_parity.py)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _bls(model, inputs, outputs, version=-1):
    response = pb_utils.InferenceRequest(model_name=model, model_version=version, inputs=inputs,
                                         requested_output_names=outputs).exec()
    if response.has_error():
        return int(response.error().code()), response.error().message()
    return [t.name() for t in response.output_tensors()]


def _bls_stream(case):
    """What a BLS call of dec_probe (decoupled) hands its caller until its iterator ends: each response's error or
    OUT (None for the empty last one)."""
    tensor = pb_utils.Tensor("CASE", np.array([case.encode()], dtype=np.object_))
    got = []
    for response in pb_utils.InferenceRequest(model_name="dec_probe", inputs=[tensor],
                                              requested_output_names=["OUT"]).exec(decoupled=True):
        if response.has_error():
            got.append(("error", response.error().message()))
        else:
            out = pb_utils.get_output_tensor_by_name(response, "OUT")
            got.append(("response", None if out is None else out.as_numpy()[0].decode()))
    return got


def _case(name, request):
    x = pb_utils.get_input_tensor_by_name(request, "X")
    ones = [pb_utils.Tensor("X", np.ones(2))]
    cases = {
        "requested": lambda: sorted(request.requested_output_names()),
        "parameters": lambda: request.parameters(),
        "dlpack": lambda: pb_utils.Tensor.from_dlpack("Y", x.to_dlpack()).as_numpy().tolist(),
        "bls_ok": lambda: _bls("ident_fp64", ones, ["Y"]),
        "bls_unknown_model": lambda: _bls("no_such_model", ones, ["Y"]),
        "bls_unknown_version": lambda: _bls("ident_fp64", ones, ["Y"], version=7),
        "bls_unknown_input": lambda: _bls("ident_fp64", [pb_utils.Tensor("Q", np.ones(2))], ["Y"]),
        "bls_unknown_output": lambda: _bls("ident_fp64", ones, ["Z"]),
        "bls_decoupled_error": lambda: _bls_stream("error_then_final"),
        "bls_wrong_datatype": lambda: _bls("ident_fp64", [pb_utils.Tensor("X", np.ones(2, np.int32))], ["Y"]),
    }
    try:
        return repr(cases[name]())
    except Exception as exc:  # noqa: BLE001 - what the call raised is the answer
        return f"{type(exc).__name__}: {exc}"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            case = json.loads(request.parameters()).get("case", "")
            report = np.array([_case(case, request).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", report)]))
        return responses
