"""BLS from `async def execute`: two async_exec() requests awaited together (add_sub and the callable
add_sub_callable); OUTPUT0 from the first, OUTPUT1 from the second."""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [request.get_input_tensor_by_name("INPUT0"), request.get_input_tensor_by_name("INPUT1")]
            first, second = await asyncio.gather(
                pb_utils.InferenceRequest(model_name="add_sub", inputs=inputs,
                                          requested_output_names=["OUTPUT0"]).async_exec(),
                pb_utils.InferenceRequest(model_name="add_sub_callable", inputs=inputs,
                                          requested_output_names=["OUTPUT1"]).async_exec())
            for answer in (first, second):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", pb_utils.get_output_tensor_by_name(first, "OUTPUT0").as_numpy()),
                pb_utils.Tensor("OUTPUT1", pb_utils.get_output_tensor_by_name(second, "OUTPUT1").as_numpy()),
            ]))
        return responses
