"""The model `pytriton serve` serves: what the target declares (`@triton_model`, read in a short-lived child process),
overridden field by field by the command line's flags, then the defaults; with the errors that show how to declare."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, TypeVar

import click

from pytriton.backends.child import reap, wait_for_exit
from pytriton.backends.target import CallableTarget
from pytriton.cli.queue_options import apply_queue_flags, queue_flags_given
from pytriton.config.gpus import NO_GPU_REASON, GpuSelectionError, parse_gpu_ids, select_gpus, visible_gpus
from pytriton.exceptions import PyTritonError
from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.datatypes import parse_datatype
from pytriton.model_config.declaration import ModelDeclaration
from pytriton.model_config.sequence import SequenceBatcher
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

GUIDE = "docs/guide/declaring-models.md"
NOTICE_AFTER_S = 3.0  # a target whose import takes longer gets a line saying what is going on

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class TargetDescription:
    """What the describe process found: the declaration (None: none), and "function", "class" or "method"."""

    declaration: ModelDeclaration | None
    kind: str = "function"
    takes_device: bool = False


@dataclasses.dataclass(frozen=True)
class ModelFlags:
    """The model's command-line flags; None (or empty) where the flag was not given."""

    model_name: str | None = None
    model_version: int = 1
    inputs: list[TensorSpec] = dataclasses.field(default_factory=list)
    outputs: list[TensorSpec] = dataclasses.field(default_factory=list)
    max_batch_size: int | None = None
    dynamic_batching: bool | None = None
    max_queue_delay_us: int | None = None
    preferred_batch_size: tuple[int, ...] = ()
    # the queue-policy flags given (see _cli_queue)
    queue_policy: dict[str, Any] = dataclasses.field(default_factory=dict)
    instances: int | None = None
    gpus: str | None = None  # --gpus as given: ids, "all", or None
    device: str | None = None  # --device: "cpu" or "gpu"
    decoupled: bool | None = None
    sequence_batcher: SequenceBatcher | None = None  # from --sequence-batching and its options
    response_cache: bool | None = None  # --response-cache / --no-response-cache


def describe_target(target: CallableTarget) -> TargetDescription:
    """Import the target in a child process (never here: it may load a model onto a GPU) and read its declaration;
    ClickException with the child's error (its traceback printed first) if it cannot be imported or found."""
    path = [p for p in sys.path if p]
    if os.getcwd() not in path:
        path.insert(0, os.getcwd())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    with tempfile.TemporaryDirectory(prefix="pytriton-describe-") as directory:
        answer_path = os.path.join(directory, "answer.json")
        returncode = _run_describe(target, answer_path, env)
        try:
            with open(answer_path, encoding="utf-8") as answer:
                result = json.load(answer)
        except (OSError, ValueError):
            raise click.ClickException(
                f"cannot load inference callable '{target}': the process that imports it exited with code "
                f"{returncode} before it answered (see above)") from None
    if "error" in result:
        if result.get("traceback"):
            click.echo(result["traceback"].rstrip("\n"), err=True)
        raise click.ClickException(f"cannot load inference callable '{target}': {result['error']}")
    declaration = result.get("declaration")
    return TargetDescription(
        declaration=None if declaration is None else ModelDeclaration.from_dict(declaration),
        kind=result.get("kind", "function"),
        takes_device=bool(result.get("takes_device")),
    )


def _run_describe(target: CallableTarget, answer_path: str, env: dict[str, str]) -> int:
    """Run the describe process to its end (not to the end of its output: a process its module forked may keep that
    open); say what is going on when the import takes a while (no time limit: a module may load a big model); the
    process dies with this one (PR_SET_PDEATHSIG) and is stopped if this one is interrupted."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytriton.backends.describe", str(target), answer_path, str(os.getpid())], env=env)
    try:
        try:
            return wait_for_exit(process, NOTICE_AFTER_S)
        except subprocess.TimeoutExpired:
            click.echo(f"importing {target.module} to read its model declaration (still running after "
                       f"{NOTICE_AFTER_S:g} s; the import is not limited in time)...", err=True)
        return process.wait()
    finally:
        reap(process)


def build_model_config(target: CallableTarget, description: TargetDescription, flags: ModelFlags) -> TritonModelConfig:
    """The declaration overridden by the flags that were given, then the defaults (no batching, one instance);
    UsageError naming the model when something is missing or does not fit."""
    declared = description.declaration or ModelDeclaration(strict=True)  # the CLI's models are strict by default
    name = flags.model_name or declared.name or target.name
    outputs = flags.outputs or declared.outputs
    inputs = flags.inputs or declared.inputs
    if not outputs:
        raise click.UsageError(_missing_tensors(name, target, description, "outputs"))
    if inputs is None:
        raise click.UsageError(_missing_tensors(name, target, description, "inputs"))
    max_batch_size = _first(flags.max_batch_size, declared.max_batch_size, 0)
    device = flags.device or declared.device
    dynamic = _first(flags.dynamic_batching, declared.batcher is not None)
    if flags.sequence_batcher is not None:  # one scheduler: the sequence batcher takes the batcher's options
        if flags.dynamic_batching:
            raise click.UsageError("--dynamic-batching and --sequence-batching: a model has one scheduler")
        flags = dataclasses.replace(flags, dynamic_batching=False, max_queue_delay_us=None, preferred_batch_size=())
        dynamic = False
    if flags.dynamic_batching and max_batch_size == 0:
        raise click.UsageError("--dynamic-batching needs --max-batch-size > 0")
    batcher_flags = [option for option, given in (("--max-queue-delay-us", flags.max_queue_delay_us is not None),
                                                  ("--preferred-batch-size", bool(flags.preferred_batch_size)))
                     if given] + queue_flags_given(flags.queue_policy)
    if batcher_flags:  # settings of Triton's dynamic_batching block: giving one turns the dynamic batcher on
        given = " and ".join(batcher_flags) + (" set" if len(batcher_flags) > 1 else " sets")
        if flags.dynamic_batching is False:
            raise click.UsageError(f"{given} the dynamic batcher, which --no-dynamic-batching turns off: drop one "
                                   "or the other")
        if max_batch_size == 0:
            raise click.UsageError(f"{given} the dynamic batcher, and model '{name}' does not batch (max_batch_size "
                                   "0): give --max-batch-size > 0")
        dynamic = True
    batcher = None
    if dynamic and max_batch_size > 0:
        batcher = dataclasses.replace(declared.batcher or DynamicBatcher())
        if flags.max_queue_delay_us is not None:
            batcher.max_queue_delay_microseconds = flags.max_queue_delay_us
        if flags.preferred_batch_size:
            batcher.preferred_batch_size = list(flags.preferred_batch_size)
        batcher = apply_queue_flags(batcher, flags.queue_policy)
    if not inputs and max_batch_size > 0:
        raise click.UsageError(
            f"model '{name}' has no inputs, so it cannot batch (the batch size comes from the inputs): serve it with "
            "max_batch_size 0 (--max-batch-size 0), or declare its inputs"
        )
    try:
        return TritonModelConfig(
            model_name=name,
            model_version=flags.model_version,
            inputs=list(inputs),
            outputs=list(outputs),
            max_batch_size=max_batch_size,
            instance_count=_first(flags.instances, declared.instances, 1),
            gpus=resolve_gpus(name, flags.gpus, device, device_flag=flags.device is not None),
            decoupled=_first(flags.decoupled, declared.decoupled, False),
            batcher=batcher,
            response_cache=_first(flags.response_cache, declared.response_cache, False),
            strict=declared.strict,
            device=device,
            sequence_batcher=flags.sequence_batcher,
        )
    except PyTritonError as exc:
        raise click.UsageError(str(exc)) from None


def resolve_gpus(model_name: str, gpus: str | None, device_kind: str | None = None, *,
                 device_flag: bool = False) -> list[int]:
    """The visible GPU ids the model's instances go on: `--gpus` checked against the GPUs found here, or, without
    it, the default for the model's device kind ("gpu": every visible GPU; None/"cpu": CPU instances), which
    `--device` gave (`device_flag`) or the declaration did."""
    if gpus is not None and device_flag and device_kind == "cpu":
        raise click.UsageError(f"model '{model_name}': --device cpu and --gpus {gpus} disagree; give one of them")
    if gpus is None and device_kind in (None, "cpu"):
        return []  # no GPU lookup (NVML) at all for a CPU model
    all_requested = gpus is not None and gpus.strip().lower() == "all"
    try:
        requested = None if gpus is None or all_requested else parse_gpu_ids(gpus)
    except GpuSelectionError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpus") from None
    available = visible_gpus()
    try:
        return select_gpus(model_name, device_kind, requested, available, all_requested=all_requested)
    except GpuSelectionError as exc:
        if available:
            raise click.BadParameter(str(exc), param_hint="--gpus") from None
        if gpus is not None:
            hint = "drop --gpus and give --device cpu" if device_kind == "gpu" else "drop --gpus"
            raise click.BadParameter(f"{exc}; {hint} to run on CPU", param_hint="--gpus") from None
        asked = "served on GPU (--device gpu)" if device_flag else "declared for GPU (device='gpu')"
        raise click.UsageError(f"model '{model_name}' is {asked} but no GPU was found ({NO_GPU_REASON}); serve it "
                               "on CPU with --device cpu") from None


def _first(*values: T | None) -> T:
    """The first value that is not None (a flag given, else the declaration, else the default)."""
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value")


def _missing_tensors(name: str, target: CallableTarget, description: TargetDescription, kind: str) -> str:
    flag = "--output" if kind == "outputs" else "--input"
    if description.declaration is not None:
        return (
            f"model '{name}' ({target}): its @triton_model declares no {kind}. Add {kind}=[Tensor(name=..., "
            f"dtype=..., shape=...)] to it, or give {flag} NAME:DTYPE:SHAPE (repeatable)"
            + (". A model that takes no inputs declares inputs=[]" if kind == "inputs" else "")
            + f". See {GUIDE}."
        )
    attr = target.attr.rsplit(".", 1)[-1]
    if description.kind == "function":
        definition = f"def {attr}(requests):\n        ..."
    elif description.kind == "class":
        definition = f"class {attr}:\n        def __call__(self, requests):\n            ..."
    else:
        definition = f"def {attr}(self, requests):  # in class {target.attr.split('.')[-2]}\n        ..."
    return (
        f"model '{name}' ({target}) declares no {kind}, and no {flag} was given. Declare the model next to its "
        f"callable:\n\n"
        "    import numpy as np\n"
        "    from pytriton.model_config import ModelConfig, Tensor, triton_model\n\n"
        "    @triton_model(\n"
        "        inputs=[Tensor(name=\"INPUT0\", dtype=np.float32, shape=(-1,))],\n"
        "        outputs=[Tensor(name=\"OUTPUT0\", dtype=np.float32, shape=(-1,))],\n"
        "        config=ModelConfig(max_batch_size=8),\n"
        "    )\n"
        f"    {definition}\n\n"
        "or give the tensors on the command line (NAME:DTYPE:SHAPE, shape without the batch dimension):\n\n"
        f"    pytriton serve {target} --input INPUT0:fp32:-1 --output OUTPUT0:fp32:-1 --max-batch-size 8\n\n"
        + ("A model that takes no inputs declares inputs=[]. " if kind == "inputs" else "")
        + f"See {GUIDE}."
    )


def parse_tensor(text: str, kind: str) -> TensorSpec:
    """NAME:DTYPE:SHAPE, e.g. INPUT0:int32:16 or TEXT:bytes:-1 or X:FP32:2,3 (shape without batch dim); a mistake is
    a BadParameter naming the option and the tensor as typed (`--input 'X:fp23:-1'`)."""
    hint = f"--{kind} '{text}'"
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise click.BadParameter(f"expected NAME:DTYPE:SHAPE (e.g. {kind.upper()}0:int32:16)", param_hint=hint)
    name, dtype_text, shape_text = parts
    try:
        datatype = parse_datatype(dtype_text)
    except ValueError as exc:
        raise click.BadParameter(f"{kind} '{name}': {exc}", param_hint=hint) from None
    try:
        shape = tuple(int(d) for d in shape_text.split(",")) if shape_text.strip() else ()
    except ValueError:
        raise click.BadParameter(f"shape of {kind} '{name}' must be comma-separated integers, got '{shape_text}'",
                                 param_hint=hint) from None
    try:
        return TensorSpec(name, datatype, shape)
    except PyTritonError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None
