import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT" + t.name()[len("INPUT"):], t.as_numpy())
                                            for t in request.inputs()]) for request in requests]
