"""auto_complete_config adds input X with other dims than config.pbtxt gives it: refused, naming the tensor."""


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [8]})
        return auto_complete_model_config

    def execute(self, requests):
        return []
