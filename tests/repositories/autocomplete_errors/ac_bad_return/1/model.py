"""auto_complete_config returns a dict instead of the ModelConfig it was given: refused."""


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1]})
        return auto_complete_model_config.as_dict()

    def execute(self, requests):
        return []
