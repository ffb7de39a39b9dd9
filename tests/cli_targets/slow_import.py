"""A model module whose import takes a while (PYTRITON_TEST_IMPORT_SECONDS; the pid goes to PYTRITON_TEST_PID_FILE)."""

import os
import time

if os.environ.get("PYTRITON_TEST_PID_FILE"):
    with open(os.environ["PYTRITON_TEST_PID_FILE"], "w") as pid_file:
        pid_file.write(str(os.getpid()))
time.sleep(float(os.environ.get("PYTRITON_TEST_IMPORT_SECONDS", "1")))


def infer_fn(requests):
    return [{} for _ in requests]
