"""The memory a worker forked from the worker template adds: the pages it shares with the template (numpy, zmq, the
worker loop, imported once there and frozen out of the garbage collector) count once in the process tree's PSS."""

from __future__ import annotations

import pytest

from tests._support.model_calls import SLOW_PID
from tests._support.rss import tree_pss_bytes
from tests._support.serving import serve


def _tree_pss(instances: int, template: str) -> int:
    with serve("tests.models:slow_pid", "--instances", str(instances), *SLOW_PID,
               env={"PYTRITON_WORKER_TEMPLATE": template}) as server:
        assert len(server.worker_pids()) == instances
        assert len(server.template_pids()) == (1 if template == "1" else 0)
        return tree_pss_bytes(server.process.pid)


@pytest.mark.slow
def test_a_forked_worker_adds_less_than_half_the_memory_of_a_fresh_one():
    """Measured on the development machine (1 and 5 instances of tests.models:slow_pid): a fresh worker adds ~24 MiB
    of PSS, a forked one ~5 MiB; the bound leaves room for other machines' libraries."""
    growth = {}
    for template in ("0", "1"):
        growth[template] = (_tree_pss(5, template) - _tree_pss(1, template)) / 4
    assert growth["1"] < growth["0"] / 2, {k: f"{v / 2**20:.1f} MiB" for k, v in growth.items()}
