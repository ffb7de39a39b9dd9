"""Always fails: execute() raises."""


class TritonPythonModel:
    def execute(self, requests):
        raise RuntimeError("fails on purpose")
