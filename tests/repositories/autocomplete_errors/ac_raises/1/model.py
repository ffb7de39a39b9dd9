"""auto_complete_config raises: the model is refused with the exception."""


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        raise RuntimeError("cannot find the weights to describe ac_raises")

    def execute(self, requests):
        return []
