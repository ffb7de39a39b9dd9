"""initialize() raises: the server must refuse to start and say why."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file missing for " + args["model_name"])

    def execute(self, requests):
        raise AssertionError("never called")
