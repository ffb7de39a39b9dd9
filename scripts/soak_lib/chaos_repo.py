"""The chaos soak's model repository (Triton Python backend), written fresh for each run:

- `double`: OUTPUT0 = 2 x, 2 instances, dynamic batching (the plain model);
- `plus_one` (x + 1) and `times_two` (2 x), 1 instance each, and `pipeline`, the ensemble of the two:
  Y = (X + 1) * 2;
- `bls`: calls `double` with pb_utils.InferenceRequest(...).exec() and answers 2 x + 1.

All take and answer FP32 of shape [batch, n] (max_batch_size 64, n free). A request can hold a model's execution
(chaos_models/arith.py) so that a fault lands while the worker is known to be inside it.
"""

from __future__ import annotations

import pathlib
import shutil

import numpy as np

MODELS_DIR = pathlib.Path(__file__).resolve().parent / "chaos_models"

# What each served model answers for x, the name of its input and output, and the worker instances of each model.
EXPECTED = {
    "double": lambda x: x * np.float32(2),
    "pipeline": lambda x: (x + np.float32(1)) * np.float32(2),
    "bls": lambda x: x * np.float32(2) + np.float32(1),
}
TENSORS = {"double": ("INPUT0", "OUTPUT0"), "pipeline": ("X", "Y"), "bls": ("INPUT0", "OUTPUT0")}
INSTANCES = {"double": 2, "plus_one": 1, "times_two": 1, "bls": 1}
SERVED = list(EXPECTED)  # the models clients call
# the models a fault may reload: every one, the ensemble included (a reload of a step swaps its pool under the
# ensemble; a reload of `double` swaps the BLS callee)
RELOADABLE = ["double", "plus_one", "times_two", "pipeline", "bls"]

_ARITH = """name: "{name}"
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: {count} }} ]
parameters [
  {{ key: "MUL" value: {{ string_value: "{mul}" }} }},
  {{ key: "ADD" value: {{ string_value: "{add}" }} }},
  {{ key: "HOLD_DIR" value: {{ string_value: "{hold_dir}" }} }}
]
{batching}"""

_BLS = """name: "bls"
backend: "python"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

_PIPELINE = """name: "pipeline"
platform: "ensemble"
max_batch_size: 64
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "plus_one"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "T" }
    },
    {
      model_name: "times_two"
      model_version: -1
      input_map { key: "INPUT0" value: "T" }
      output_map { key: "OUTPUT0" value: "Y" }
    }
  ]
}
"""


def write_repository(root: pathlib.Path, hold_dir: pathlib.Path) -> pathlib.Path:
    """`root` filled with the models above (removed first if it exists); holds write their pid files in
    `hold_dir`."""
    if root.exists():
        shutil.rmtree(root)
    arith = {"double": ("2", "0"), "plus_one": ("1", "1"), "times_two": ("2", "0")}
    for name, (mul, add) in arith.items():
        (root / name / "1").mkdir(parents=True)
        shutil.copy(MODELS_DIR / "arith.py", root / name / "1" / "model.py")
        batching = "dynamic_batching { }\n" if name == "double" else ""
        (root / name / "config.pbtxt").write_text(_ARITH.format(
            name=name, count=INSTANCES[name], mul=mul, add=add, hold_dir=hold_dir, batching=batching))
    (root / "bls" / "1").mkdir(parents=True)
    shutil.copy(MODELS_DIR / "bls.py", root / "bls" / "1" / "model.py")
    (root / "bls" / "config.pbtxt").write_text(_BLS)
    (root / "pipeline" / "1").mkdir(parents=True)
    (root / "pipeline" / "config.pbtxt").write_text(_PIPELINE)
    return root
