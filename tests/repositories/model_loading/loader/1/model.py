"""Calls Triton's model loading API from execute(): CALL is a JSON object {"call": "load" | "unload" | "ready",
"model": name, and the call's other arguments}; RESULT is "ok", the readiness ("True" / "False"), or
"<exception type>: <message>"."""

import base64
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def run(call):
    kind = call.pop("call")
    if kind == "load":
        files = call.get("files")
        if isinstance(files, dict):  # (contents travel base64-encoded in the JSON)
            files = {key: base64.b64decode(value) for key, value in files.items()}
        pb_utils.load_model(call["model"], call.get("config", ""), files)
        return "ok"
    if kind == "unload":
        pb_utils.unload_model(call["model"], unload_dependents=call.get("unload_dependents", False))
        return "ok"
    return str(pb_utils.is_model_ready(call["model"], call.get("version", "")))


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = json.loads(pb_utils.get_input_tensor_by_name(request, "CALL").as_numpy()[0])
            try:
                result = run(call)
            except Exception as exc:  # noqa: BLE001 - the test reads what the model saw
                result = f"{type(exc).__name__}: {exc}"
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("RESULT", np.array([result.encode()], dtype=np.object_))]))
        return responses
