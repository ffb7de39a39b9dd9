"""No config.pbtxt: a decoupled model (set_model_transaction_policy) that sends COUNT responses, 0..COUNT-1, then the
final flag."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "COUNT", "data_type": "TYPE_INT32", "dims": [1]})
        auto_complete_model_config.add_output({"name": "INDEX", "data_type": "TYPE_INT32", "dims": [1]})
        auto_complete_model_config.set_model_transaction_policy({"decoupled": True})
        return auto_complete_model_config

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            sender = request.get_response_sender()
            for index in range(count):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.array([index], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
