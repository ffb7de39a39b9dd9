import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Asks to reschedule its request although the model has no iterative sequence batcher."""

    def execute(self, requests):
        for request in requests:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        return [None for _ in requests]
