"""initialize() raises (a load that fails, in Triton's own Python-backend API)."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file missing for " + args["model_name"])

    def execute(self, requests):
        raise AssertionError("never called")
