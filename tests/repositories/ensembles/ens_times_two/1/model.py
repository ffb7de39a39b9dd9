"""x * 2, and SOURCE: the file mapped where the input's bytes lie in this process (from /proc/self/maps), so that a
test can see which shared-memory segment the input was read from (no copy: the previous step's response arena)."""

import numpy as np
import triton_python_backend_utils as pb_utils


def mapped_file(address):
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            start, end = (int(v, 16) for v in parts[0].split("-"))
            if start <= address < end:
                return parts[5] if len(parts) > 5 else ""
    return ""


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            source = mapped_file(x.__array_interface__["data"][0]) if x.size else ""
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32)),
                pb_utils.Tensor("SOURCE", np.array([source.encode()], dtype=np.object_)),
            ]))
        return responses
