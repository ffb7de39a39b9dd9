"""A model module that records each import of itself."""

from tests.cli_targets import record_import

record_import(__name__)


class Doubler:
    def __call__(self, requests):
        return [{"OUT": r["IN"] * 2} for r in requests]


double_model = Doubler()  # a callable object: its model name comes from this attribute, not from its class
