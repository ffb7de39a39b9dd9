"""`@triton_model`: a model's tensors, batching and instances declared next to its callable, so that
`pytriton serve module:callable` needs no flags; `ModelDeclaration` is what it attaches (JSON-able, for the CLI)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from pytriton.exceptions import PyTritonError, PyTritonValidationError
from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.datatypes import numpy_to_triton
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.names import model_name_problem
from pytriton.model_config.tensor import Tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig, batcher_from_triton

DECLARATION_ATTRIBUTE = "__triton_model__"
DEVICES = ("cpu", "gpu")

T = TypeVar("T")


def tensor_specs(tensors: Sequence[Tensor], prefix: str) -> list[TensorSpec]:
    """PyTriton `Tensor`s as the server's `TensorSpec`s; an unnamed one is called PREFIX_<n> (n from 1), as in bind."""
    specs = []
    for index, tensor in enumerate(tensors, start=1):
        if not isinstance(tensor, Tensor):
            raise PyTritonValidationError(f"{prefix.lower()}s must be pytriton.model_config.Tensor objects")
        name = tensor.name or f"{prefix}_{index}"
        try:
            datatype = numpy_to_triton(tensor.dtype)
        except TypeError as exc:
            raise PyTritonValidationError(f"{prefix.lower()} '{name}': {exc}") from None
        shape = tensor.shape
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable) or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
            raise PyTritonValidationError(f"{prefix.lower()} '{name}': shape must be a tuple of ints without the batch "
                                          f"dimension (-1: variable), e.g. shape=(16,), got {shape!r}")
        specs.append(TensorSpec(name, datatype, tuple(int(d) for d in shape), bool(tensor.optional)))
    return specs


@dataclasses.dataclass(frozen=True)
class ModelDeclaration:
    """What `@triton_model` declared; None means "not declared" (the CLI's flag or default applies)."""

    name: str | None = None
    inputs: list[TensorSpec] | None = None
    outputs: list[TensorSpec] | None = None
    max_batch_size: int | None = None
    batcher: DynamicBatcher | None = None  # with max_batch_size > 0: Triton's dynamic batcher
    decoupled: bool | None = None
    response_cache: bool | None = None
    instances: int | None = None
    device: str | None = None  # "cpu" or "gpu"
    strict: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict that `from_dict` turns back into an equal declaration."""
        fields = dataclasses.asdict(self)
        for kind in ("inputs", "outputs"):
            specs = getattr(self, kind)
            fields[kind] = None if specs is None else [dataclasses.asdict(s) for s in specs]
        fields["batcher"] = None if self.batcher is None else self.batcher.to_triton_dict()
        return fields

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelDeclaration:
        fields = dict(data)
        for kind in ("inputs", "outputs"):
            if fields.get(kind) is not None:
                fields[kind] = [TensorSpec(**s) for s in fields[kind]]
        if fields.get("batcher") is not None:
            fields["batcher"] = batcher_from_triton(fields["batcher"])
        return cls(**fields)


def triton_model(
    *,
    inputs: Sequence[Tensor] | None = None,
    outputs: Sequence[Tensor] | None = None,
    config: ModelConfig | None = None,
    name: str | None = None,
    model_name: str | None = None,
    instances: int | None = None,
    device: str | None = None,
    strict: bool = False,
) -> Callable[[T], T]:
    """Declare the model that an inference callable (a function, a `@batch` function or a class) serves.

    `pytriton serve module:callable` reads the declaration; its flags override it field by field. The callable is
    returned unchanged, so it still works as a plain function and with `Triton.bind`.

    Args:
        inputs: The model inputs (shape without the batch dimension). None: not declared (`--input` must give them);
            `[]`: a model without inputs.
        outputs: The model outputs; None: not declared (`--output` must give them).
        config: Batching, dynamic batcher, response cache and decoupled mode, as in `Triton.bind`. None: not declared
            (no batching unless `--max-batch-size` says so).
        name: The model name (default: the callable's name). `model_name` is the same, as `Triton.bind` spells it.
        model_name: Alias of `name`.
        instances: Instances per device (default 1; `--instances` overrides).
        device: "cpu" or "gpu": the kind of device the model runs on.
        strict: Outputs must match the declared dtypes exactly (else safe casts are applied), as in `Triton.bind`.

    Raises:
        PyTritonValidationError: an argument is not valid (named in the message).
    """
    declaration = _declaration(inputs, outputs, config, name, model_name, instances, device, strict)

    def attach(obj: T) -> T:
        if not callable(obj):
            raise PyTritonValidationError(f"@triton_model decorates a function or a class, got {type(obj).__name__}")
        setattr(obj, DECLARATION_ATTRIBUTE, declaration)
        return obj

    return attach


def declaration_of(obj: Any) -> ModelDeclaration | None:
    """The declaration `@triton_model` attached to `obj` (through `@batch`-style wrappers too), or None."""
    found = getattr(obj, DECLARATION_ATTRIBUTE, None)
    return found if isinstance(found, ModelDeclaration) else None


def _declaration(
    inputs: Sequence[Tensor] | None,
    outputs: Sequence[Tensor] | None,
    config: ModelConfig | None,
    name: str | None,
    model_name: str | None,
    instances: int | None,
    device: str | None,
    strict: bool,
) -> ModelDeclaration:
    where = "@triton_model"
    if name is not None and model_name is not None and name != model_name:
        raise PyTritonValidationError(f"{where}: name={name!r} and model_name={model_name!r} disagree; give one")
    name = name if name is not None else model_name
    if name is not None:
        where = f"@triton_model(name={name!r})"
        if not isinstance(name, str):
            raise PyTritonValidationError(f"{where}: a model name is a non-empty string without '/'")
        problem = model_name_problem(name)
        if problem is not None:
            raise PyTritonValidationError(f"{where}: {problem}")
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        if tensors is not None and (isinstance(tensors, (str, Tensor)) or not isinstance(tensors, Sequence)):
            raise PyTritonValidationError(
                f"{where}: {kind} must be a list of Tensor(...), got {type(tensors).__name__}")
    if config is not None and not isinstance(config, ModelConfig):
        raise PyTritonValidationError(f"{where}: config must be a pytriton.model_config.ModelConfig, "
                                      f"got {type(config).__name__}")
    if instances is not None and (isinstance(instances, bool) or not isinstance(instances, int) or instances < 1):
        raise PyTritonValidationError(f"{where}: instances must be an integer >= 1, got {instances!r}")
    if device is not None and device not in DEVICES:
        raise PyTritonValidationError(f"{where}: device must be 'cpu' or 'gpu', got {device!r}")
    try:
        input_specs = None if inputs is None else tensor_specs(inputs, "INPUT")
        output_specs = None if outputs is None else tensor_specs(outputs, "OUTPUT")
    except PyTritonError as exc:
        raise PyTritonValidationError(f"{where}: {exc.message}") from None
    if outputs is not None and any(t.optional for t in outputs):
        raise PyTritonValidationError(f"{where}: outputs cannot be optional")
    batching = config is not None and config.batching
    if inputs is not None and len(inputs) == 0 and batching:
        raise PyTritonValidationError(f"{where}: a model without inputs cannot batch (the batch size comes from the "
                                      "inputs): use ModelConfig(batching=False), or declare its inputs")
    declaration = ModelDeclaration(
        name=name,
        inputs=input_specs,
        outputs=output_specs,
        max_batch_size=None if config is None else (config.max_batch_size if batching else 0),
        batcher=config.batcher if config is not None and batching else None,
        decoupled=None if config is None else config.decoupled,
        response_cache=None if config is None else config.response_cache,
        instances=instances,
        device=device,
        strict=bool(strict),
    )
    # The rest (names repeated, sizes out of range, no outputs) as the server checks it, now rather than at serve.
    try:
        TritonModelConfig(
            model_name=name or "model",
            inputs=input_specs or [],
            outputs=output_specs if output_specs is not None else [TensorSpec("_", "INT8", (1,))],
            max_batch_size=declaration.max_batch_size or 0,
            instance_count=instances or 1,
            batcher=declaration.batcher,
        )
    except PyTritonError as exc:
        raise PyTritonValidationError(f"{where}: {exc.message.partition(': ')[2] or exc.message}") from None
    return declaration


__all__ = ["ModelDeclaration", "declaration_of", "tensor_specs", "triton_model"]
