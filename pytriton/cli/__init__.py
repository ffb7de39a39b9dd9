"""The `pytriton` command: `pytriton serve` (`serve.py`) and its option groups, one module per group (the model a
target declares, gRPC limits, TLS, the dynamic batcher's queue policy, the sequence batcher, SageMaker/Vertex AI).

`main` loads on first use: a process that imports one option group does not load the server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytriton.utils.lazy import lazy_names

if TYPE_CHECKING:
    from pytriton.cli.serve import main

__getattr__ = lazy_names(__name__, {"main": "pytriton.cli.serve"})

__all__ = ["main"]
