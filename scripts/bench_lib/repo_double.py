"""A model repository with serve_double.py's models as Triton Python-backend models (double_model.py), for the
bench's third server: the same y = 2x served by `pytriton serve --model-repository` (a worker process per instance)
instead of a callable bound with `Triton().bind` (hosted in the user's process)."""

from __future__ import annotations

import pathlib
import shutil

MODEL_FILE = pathlib.Path(__file__).resolve().parent / "double_model.py"
FLOATS = {"double_small": 16, "double_1mib": 262144}  # as serve_double.MODELS

CONFIG = """backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ {n} ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ {n} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{batching}"""


def write_repository(root: pathlib.Path, models: list[str], batching: str, delay_us: int = 0,
                     floats: dict[str, int] | None = None) -> pathlib.Path:
    """`root` filled with one folder per model: config.pbtxt (max_batch_size 64, one instance; with
    `dynamic_batching {}` when batching == "dynamic": delay 0 as PyTriton's default DynamicBatcher, or
    `max_queue_delay_microseconds: delay_us`) and 1/model.py. `floats`: floats per request of each model (default
    serve_double.py's)."""
    if root.exists():
        shutil.rmtree(root)
    sizes = floats or FLOATS
    for name in models:
        (root / name / "1").mkdir(parents=True)
        shutil.copy(MODEL_FILE, root / name / "1" / "model.py")
        delay = f" max_queue_delay_microseconds: {delay_us}" if delay_us else ""
        block = f"dynamic_batching {{{delay} }}\n" if batching == "dynamic" else ""
        (root / name / "config.pbtxt").write_text(CONFIG.format(n=sizes[name], batching=block))
    return root
