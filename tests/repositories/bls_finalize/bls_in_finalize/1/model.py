"""Makes a BLS request from finalize(), as Triton's qa/python_models/bls_finalize_error does; prints what it raised."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.zeros(1, np.float32))]) for _ in requests]

    def finalize(self):
        request = pb_utils.InferenceRequest(model_name="bls_in_finalize", inputs=[], requested_output_names=["Y"])
        try:
            request.exec()
        except pb_utils.TritonModelException as exc:
            print(f"finalize's BLS request raised: {exc}", flush=True)
