"""Stages Triton's Python-backend QA models (the server repository's `qa/python_models`) into one model repository
as Triton's QA scripts stage them (`qa/L0_backend_python/**/test.sh` and the other L0 suites that use a model):
each model folder gets `config.pbtxt` and `1/model.py`, copied from `qa/python_models/<source>/`, sometimes renamed
and edited (a `sed` of the script becomes a regular-expression substitution here, an `echo >>` an appended line).

Run as a script to stage a folder (e.g. to give the same repository to the real `tritonserver`):

    python tests/e2e/triton_qa_staging.py /path/to/server-checkout /tmp/qa-models
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_FILES = (("model.py", "1/model.py"), ("config.pbtxt", "config.pbtxt"))


@dataclass(frozen=True)
class Staged:
    """One model of the staged repository: folder `name`, made from `qa/python_models/<source>` by `script`."""

    name: str
    source: str
    script: str
    files: tuple[tuple[str, str], ...] = DEFAULT_FILES  # (file in the source folder, path in the model folder)
    edits: tuple[tuple[str, str], ...] = ()  # (regular expression, replacement) in config.pbtxt, multi-line
    append: tuple[str, ...] = ()  # lines appended to config.pbtxt
    config_from: str | None = None  # another source folder's config.pbtxt
    model_from: str | None = None  # another source folder's model.py, as 1/model.py


def _renamed(name: str) -> tuple[str, str]:
    return (r"(?m)^name:.*", f'name: "{name}"')


L0 = "L0_backend_python/test.sh"
LIFECYCLE = "L0_backend_python/lifecycle/test.sh"
BATCH8 = (r"(?m)^max_batch_size:.*", "max_batch_size: 8")
RS = "L0_backend_python/response_sender/test.sh"
RS_FILES = (("model_common.py", "1/model_common.py"), ("model.py", "1/model.py"), ("config.pbtxt", "config.pbtxt"))
RS_ASYNC = (("model_common.py", "1/model_common.py"), ("model_async.py", "1/model.py"),
            ("config.pbtxt", "config.pbtxt"))
DECOUPLED = "model_transaction_policy { decoupled: True }"
RS_BATCHING = "dynamic_batching { max_queue_delay_microseconds: 500000 }"

STAGED: tuple[Staged, ...] = (
    # qa/L0_backend_python/test.sh
    Staged("identity_fp32", "identity_fp32", L0),
    Staged("identity_bf16", "identity_bf16", L0),
    Staged("identity_uint8", "identity_fp32", L0,
           edits=(_renamed("identity_uint8"), ("TYPE_FP32", "TYPE_UINT8"), BATCH8),
           append=("dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }",)),
    Staged("identity_uint8_nobatch", "identity_fp32", L0,
           edits=(_renamed("identity_uint8_nobatch"), ("TYPE_FP32", "TYPE_UINT8"), (r"(?m)^max_batch_size:.*", ""))),
    Staged("identity_uint32", "identity_fp32", L0, edits=(_renamed("identity_uint32"), ("TYPE_FP32", "TYPE_UINT32"))),
    Staged("identity_bool", "identity_fp32", L0, edits=(_renamed("identity_bool"), ("TYPE_FP32", "TYPE_BOOL"))),
    Staged("default_model_name", "identity_fp32", L0,
           files=(("model.py", "1/mymodel.py"), ("config.pbtxt", "config.pbtxt")),
           edits=(_renamed("default_model_name"),), append=('default_model_filename: "mymodel.py"',)),
    Staged("pytorch_fp32_fp32", "pytorch_fp32_fp32", L0, edits=(_renamed("pytorch_fp32_fp32"),)),
    Staged("delayed_model", "delayed_model", L0),
    Staged("init_args", "init_args", L0, edits=(("TRITON_DIR_PATH", "/opt/tritonserver"),)),
    Staged("optional", "optional", L0),
    Staged("non_contiguous", "non_contiguous", L0),
    Staged("string", "string", L0),
    Staged("string_fixed", "string_fixed", L0),
    Staged("dlpack_identity", "dlpack_identity", L0),
    Staged("add_sub_gpu", "add_sub_gpu", L0, files=(("config.pbtxt", "config.pbtxt"),),
           model_from="add_sub"),
    Staged("multi_file", "multi_file", L0,
           files=(("model.py", "1/model.py"), ("file1.py", "1/file1.py"), ("file2.py", "1/file2.py")),
           config_from="identity_fp32", edits=(_renamed("multi_file"),)),
    Staged("model_env", "model_env", L0),
    Staged("init_exit", "init_exit", L0),
    # qa/L0_backend_python/async_execute/test.sh
    Staged("async_execute_decouple", "async_execute_decouple", "L0_backend_python/async_execute/test.sh"),
    Staged("async_execute_decouple_bls", "async_execute_decouple_bls", "L0_backend_python/async_execute/test.sh"),
    # qa/L0_backend_python/response_sender/test.sh
    Staged("response_sender", "response_sender", RS, files=RS_FILES),
    Staged("response_sender_decoupled", "response_sender", RS, files=RS_FILES, append=(DECOUPLED,)),
    Staged("response_sender_async", "response_sender", RS, files=RS_ASYNC),
    Staged("response_sender_decoupled_async", "response_sender", RS, files=RS_ASYNC, append=(DECOUPLED,)),
    Staged("response_sender_batching", "response_sender", RS, files=RS_FILES, append=(RS_BATCHING,)),
    Staged("response_sender_decoupled_batching", "response_sender", RS, files=RS_FILES,
           append=(DECOUPLED, RS_BATCHING)),
    Staged("response_sender_async_batching", "response_sender", RS, files=RS_ASYNC, append=(RS_BATCHING,)),
    Staged("response_sender_decoupled_async_batching", "response_sender", RS, files=RS_ASYNC,
           append=(DECOUPLED, RS_BATCHING)),
    Staged("response_sender_complete_final", "response_sender_complete_final", RS),
    Staged("response_sender_error", "response_sender_error", "(no script at r24.10: default staging)"),
    # qa/L0_backend_python/env/test.sh and setup_python_enviroment.sh (they add EXECUTION_ENV_PATH to a conda pack)
    Staged("python_version", "python_version", "L0_backend_python/env/test.sh (without the conda pack)"),
    # qa/L0_backend_python/decoupled/test.sh, lifecycle/test.sh
    Staged("execute_cancel", "execute_cancel", LIFECYCLE),
    Staged("dlpack_add_sub", "dlpack_add_sub", "L0_backend_python/decoupled/test.sh"),
    # qa/L0_backend_python/request_rescheduling/test.sh
    Staged("bls_request_rescheduling", "bls_request_rescheduling", "L0_backend_python/request_rescheduling/test.sh"),
    Staged("request_rescheduling_addsub", "request_rescheduling_addsub",
           "L0_backend_python/request_rescheduling/test.sh"),
    Staged("iterative_sequence", "iterative_sequence", "L0_backend_python/request_rescheduling/test.sh"),
    Staged("wrong_return_type", "wrong_return_type", "L0_backend_python/request_rescheduling/test.sh"),
    # qa/L0_backend_python/io/test.sh
    Staged("dlpack_io_identity_1", "dlpack_io_identity", "L0_backend_python/io/test.sh",
           edits=(_renamed("dlpack_io_identity_1"),)),
    Staged("dlpack_io_identity_2", "dlpack_io_identity", "L0_backend_python/io/test.sh",
           edits=(_renamed("dlpack_io_identity_2"),)),
    Staged("dlpack_io_identity_3", "dlpack_io_identity", "L0_backend_python/io/test.sh",
           edits=(_renamed("dlpack_io_identity_3"),)),
    Staged("ensemble_io", "ensemble_io", "L0_backend_python/io/test.sh", files=(("config.pbtxt", "config.pbtxt"),)),
    Staged("dlpack_io_identity_decoupled", "dlpack_io_identity_decoupled", "L0_backend_python/io/test.sh"),
    Staged("dlpack_empty_output", "dlpack_empty_output", "L0_backend_python/io/test.sh"),
    Staged("variable_gpu_output", "variable_gpu_output", "L0_backend_python/io/test.sh"),
    Staged("add_sub", "add_sub", "L0_backend_python/io/test.sh"),
    # qa/L0_backend_python/model_control/test.sh
    Staged("simple_identity_fp32", "simple_identity_fp32", "L0_backend_python/model_control/test.sh",
           files=(("config.pbtxt", "config.pbtxt"),)),
    # qa/L0_backend_python/bls/test.sh
    Staged("bls", "bls", "L0_backend_python/bls/test.sh"),
    Staged("bls_async", "bls_async", "L0_backend_python/bls/test.sh"),
    Staged("bls_memory", "bls_memory", "L0_backend_python/bls/test.sh"),
    Staged("bls_memory_async", "bls_memory_async", "L0_backend_python/bls/test.sh"),
    
    Staged("dlpack_square", "dlpack_square", "L0_backend_python/bls/test.sh"),
    Staged("identity_fp32_timeout", "identity_fp32_timeout", "L0_backend_python/bls/test.sh"),
    Staged("bls_init_error", "bls_init_error", "L0_backend_python/bls/test.sh"),
    Staged("bls_finalize_error", "bls_finalize_error", "L0_backend_python/bls/test.sh"),
    Staged("bls_model_loading", "bls_model_loading", "L0_backend_python/bls/test.sh"),
    Staged("bls_parameters", "bls_parameters", "L0_backend_python/bls/test.sh"),
    # qa/L0_backend_python/lifecycle/test.sh
    Staged("error_code", "error_code", LIFECYCLE),
    Staged("execute_error", "execute_error", LIFECYCLE, edits=(_renamed("execute_error"), BATCH8),
           append=("dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }",)),
    Staged("execute_grpc_error", "execute_grpc_error", LIFECYCLE, edits=(_renamed("execute_grpc_error"), BATCH8),
           append=("dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 1200000 }",)),
    Staged("execute_return_error", "execute_return_error", LIFECYCLE),
    Staged("wrong_model", "wrong_model", LIFECYCLE, edits=(_renamed("wrong_model"), ("TYPE_FP32", "TYPE_UINT32"))),
    Staged("init_error", "init_error", LIFECYCLE),
    Staged("fini_error", "fini_error", LIFECYCLE),
    Staged("auto_complete_error", "auto_complete_error", LIFECYCLE + " (--strict-model-config=false)",
           files=(("model.py", "1/model.py"),)),
    # qa/L0_backend_python/logging, custom_metrics, ensemble
    Staged("identity_fp32_logging", "identity_fp32_logging", "L0_backend_python/logging/test.sh"),
    Staged("custom_metrics", "custom_metrics", "L0_backend_python/custom_metrics/test.sh"),
    Staged("ensemble", "ensemble", "L0_backend_python/ensemble/test.sh", files=(("config.pbtxt", "config.pbtxt"),)),
    Staged("add_sub_1", "add_sub", "L0_backend_python/ensemble/test.sh"),
    Staged("add_sub_2", "add_sub", "L0_backend_python/ensemble/test.sh"),
    # the other L0 suites that stage a Python model of qa/python_models
    Staged("auto_complete", "auto_complete", "L0_model_config/test.sh", files=(("model.py", "1/model.py"),)),
    Staged("bls_onnx_warmup", "bls_onnx_warmup", "L0_warmup/test.sh"),
    Staged("bls_simple", "bls_simple", "L0_trace/test.sh", files=(("bls_simple.py", "1/model.py"),)),
    Staged("bls_undefined", "bls_undefined", "L0_perf_analyzer_capi/test.sh"),
    Staged("busy_op", "busy_op", "L0_memory_growth/test.sh"),
    Staged("cuda_memory_consumer", "cuda_memory_consumer", "L0_lifecycle/test.sh (cp -r)",
           files=(("1/model.py", "1/model.py"), ("config.pbtxt", "config.pbtxt"))),
    Staged("dlpack_test", "dlpack_test", "L0_dlpack_multi_gpu/test.sh"),
    Staged("execute_delayed_model", "execute_delayed_model", "(no script at r24.10: default staging)"),
    Staged("ground_truth", "ground_truth", "(no script at r24.10: default staging)"),
    Staged("model_init_del", "model_init_del", "L0_model_update/test.sh (cp -r; only model.py moves into 1/)",
           files=(("model.py", "1/model.py"), ("util.py", "util.py"), ("config.pbtxt", "config.pbtxt"))),
    Staged("sequence_py", "sequence_py", "L0_sequence_batcher/test.sh"),
    Staged("string_identity", "string_identity", "L0_string_io/test.sh", edits=((r"\[ 1 \]", "[ 8 ]"),)),
    Staged("resnet50", "torchvision", "(no script at r24.10: default staging of torchvision/resnet50)",
           files=(("resnet50/model.py", "1/model.py"), ("resnet50/config.pbtxt", "config.pbtxt"))),
)

# Folders of qa/python_models that are no model of their own, with why (each is staged in another form above, or is
# a template whose configs another suite generates from non-Python models, or is a backend).
NOT_MODELS: dict[str, str] = {
    "dlpack_sub_add": "model.py only: L0_infer pairs it with configs generated from its ONNX/TF models",
    "sub_add": "model.py only: L0_infer pairs it with configs generated from its ONNX/TF models",
    "sequence_int32": "model.py for L0_sequence_batcher, which generates its configs from ONNX models",
    "fan_add_sub": "an ensemble template L0_io fills with its generated models",
    "ensemble_gpu": "an ensemble over libtorch_float32_float32_float32 (a PyTorch-backend model of Triton's data)",
    "python_based_backends": "a Python-based backend (backends/<name>/model.py), not a model",
}


def stage(checkout: Path, dest: Path, names: Iterable[str] | None = None) -> list[Staged]:
    """Stage every model of STAGED found in `checkout` (a server checkout, or its `qa` folder) into `dest`, or only
    those named in `names`."""
    qa = checkout / "qa" if (checkout / "qa").is_dir() else checkout
    models = qa / "python_models"
    if not models.is_dir():
        raise FileNotFoundError(f"{checkout}: no qa/python_models folder")
    wanted = None if names is None else set(names)
    staged = []
    for item in STAGED:
        source = models / item.source
        if not source.is_dir() or (wanted is not None and item.name not in wanted):
            continue
        folder = dest / item.name
        (folder / "1").mkdir(parents=True)
        for src, target in item.files:
            (folder / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / src, folder / target)
        if item.model_from:
            shutil.copyfile(models / item.model_from / "model.py", folder / "1" / "model.py")
        if item.config_from:
            shutil.copyfile(models / item.config_from / "config.pbtxt", folder / "config.pbtxt")
        config = folder / "config.pbtxt"
        if config.exists() and (item.edits or item.append):
            text = config.read_text()
            for pattern, replacement in item.edits:
                text = re.sub(pattern, replacement, text)
            for line in item.append:
                text = text.rstrip("\n") + "\n" + line + "\n"
            config.write_text(text)
        staged.append(item)
    return staged


def unstaged_folders(checkout: Path) -> list[str]:
    """Folders of qa/python_models that neither STAGED nor NOT_MODELS accounts for (a newer checkout's models)."""
    qa = checkout / "qa" if (checkout / "qa").is_dir() else checkout
    known = {item.source for item in STAGED} | set(NOT_MODELS) | {"add_sub_gpu"}
    return sorted(p.name for p in (qa / "python_models").iterdir() if p.is_dir() and p.name not in known)


if __name__ == "__main__":
    done = stage(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(item.name for item in done))
