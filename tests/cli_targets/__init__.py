"""Targets for `pytriton serve` tests that record which processes import them (PYTRITON_TEST_IMPORT_LOG)."""

import os


def record_import(name: str) -> None:
    path = os.environ.get("PYTRITON_TEST_IMPORT_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{name} {os.getpid()}\n")


record_import(__name__)
