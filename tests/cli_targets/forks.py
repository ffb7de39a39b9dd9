"""A model module that forks at import; the forked process lives on (its pid goes to PYTRITON_TEST_PID_FILE)."""

import os
import time

_pid = os.fork()
if _pid == 0:
    time.sleep(60)
    os._exit(0)
with open(os.environ["PYTRITON_TEST_PID_FILE"], "w") as pid_file:
    pid_file.write(str(_pid))


def infer_fn(requests):
    return [{} for _ in requests]
