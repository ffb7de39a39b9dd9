"""The server-side description of one model: what the core validates against and reports.

`to_triton_dict` renders it as Triton's model configuration (model_config.proto in JSON form, with the
fields Triton always prints), which the gRPC front-end parses into `ModelConfig` and HTTP returns as is.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pytriton.exceptions import PyTritonModelConfigError
from pytriton.model_config.common import DynamicBatcher, QueuePolicy, TimeoutAction, enum_member
from pytriton.model_config.datatypes import CONFIG_TO_TRITON, TRITON_TO_CONFIG, TRITON_TO_NUMPY, numpy_to_triton
from pytriton.model_config.instance_groups import InstanceGroup, InstancePlace, group_problem, places
from pytriton.model_config.names import model_name_problem
from pytriton.model_config.sequence import SequenceBatcher, sequence_batcher_from_triton
from pytriton.model_config.warmup import WarmupSample, warmup_from_triton


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output: name, Triton datatype and shape without the batch dimension (-1 = variable)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    optional: bool = False
    reshape: tuple[int, ...] | None = None  # the shape the model sees (config.pbtxt `reshape`); None: `shape`
    ragged: bool = False  # (an input's `allow_ragged_batch`) requests differing in its shape still batch together

    def __post_init__(self) -> None:
        if not self.name:
            raise PyTritonModelConfigError("tensor name must not be empty")
        if self.datatype not in TRITON_TO_NUMPY:
            raise PyTritonModelConfigError(f"tensor '{self.name}': unknown datatype '{self.datatype}'")
        shape = tuple(int(d) for d in self.shape)
        if any(d < -1 for d in shape):
            raise PyTritonModelConfigError(f"tensor '{self.name}': dimensions must be >= -1, got {list(shape)}")
        object.__setattr__(self, "shape", shape)
        if self.reshape is not None:
            object.__setattr__(self, "reshape", tuple(int(d) for d in self.reshape))

    @classmethod
    def from_numpy(cls, name: str, dtype: Any, shape: tuple[int, ...], optional: bool = False) -> TensorSpec:
        return cls(name=name, datatype=numpy_to_triton(dtype), shape=tuple(shape), optional=optional)

    @property
    def numpy_dtype(self) -> np.dtype:
        return TRITON_TO_NUMPY[self.datatype]

    @property
    def dtype(self) -> type:
        """The numpy scalar type, as PyTriton's TensorSpec has it (`np.bytes_` for BYTES)."""
        return np.bytes_ if self.datatype == "BYTES" else TRITON_TO_NUMPY[self.datatype].type


@dataclasses.dataclass
class TritonModelConfig:
    """What the server knows about a model it serves."""

    model_name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    model_version: int = 1
    max_batch_size: int = 0
    instance_count: int = 1
    gpus: list[int] = dataclasses.field(default_factory=list)
    decoupled: bool = False
    backend_parameters: dict[str, str] = dataclasses.field(default_factory=dict)
    batcher: DynamicBatcher | None = None
    response_cache: bool = False
    strict: bool = True  # outputs must match the declared dtype exactly (else safe casts are applied)
    device: str | None = None  # the device kind the model was declared for ("cpu" | "gpu"), None: not declared
    # From a repository's config.pbtxt (defaults otherwise): the labels of classification outputs and their files,
    # the version policy and default model file as written there.
    labels: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    label_filenames: dict[str, str] = dataclasses.field(default_factory=dict)
    version_policy: dict[str, Any] | None = None
    default_model_filename: str = ""
    # An ensemble's steps as Triton's JSON shows `ensemble_scheduling` ({"step": [...]}); None for other models.
    ensemble_scheduling: dict[str, Any] | None = None
    sequence_batcher: SequenceBatcher | None = None  # Triton's sequence_batching (a stateful model)
    # Triton's KIND_MODEL instance group: `instance_count` instances that place themselves on devices (no GPU each).
    kind_model: bool = False
    warmup: list[WarmupSample] = dataclasses.field(default_factory=list)  # Triton's model_warmup
    # Triton's batch_input / batch_output entries, as its JSON shows them (a Python model only sees them in its config)
    batch_inputs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    batch_outputs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # The instance groups of a repository's config.pbtxt (one or several), normalised as Triton does; empty: the one
    # group that `instance_count`, `gpus` and `kind_model` describe (a model bound in Python, or `pytriton serve`'s).
    instance_groups: list[InstanceGroup] = dataclasses.field(default_factory=list)
    backend: str = "python"  # Triton's `backend`: "python", or a Python-based backend's name (its model.py runs)

    def __post_init__(self) -> None:
        name = self.model_name
        problem = model_name_problem(name) if isinstance(name, str) else f"invalid model name {name!r}: not a string"
        if problem is not None:
            raise PyTritonModelConfigError(problem)
        if self.max_batch_size < 0:
            raise PyTritonModelConfigError(f"model '{self.model_name}': max_batch_size must be >= 0")
        if self.model_version < 0:
            raise PyTritonModelConfigError(f"model '{self.model_name}': model_version must be >= 0")
        if self.instance_count < 1:
            raise PyTritonModelConfigError(f"model '{self.model_name}': instance count must be >= 1")
        if self.kind_model and self.gpus:  # (Triton's wording)
            raise PyTritonModelConfigError(f"instance group {self.model_name}_0 of model {self.model_name} has kind "
                                           "KIND_MODEL but specifies one or more GPUs")
        for group in self.instance_groups:
            problem = group_problem(self.model_name, group)
            if problem is not None:
                raise PyTritonModelConfigError(problem)
        for kind, specs in (("input", self.inputs), ("output", self.outputs)):
            names = [s.name for s in specs]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise PyTritonModelConfigError(f"model '{self.model_name}': duplicate {kind} names {duplicates}")
        if not self.outputs:
            raise PyTritonModelConfigError(f"model '{self.model_name}': at least one output is required")
        preferred = list(self.batcher.preferred_batch_size or []) if self.batcher is not None else []
        for size in preferred:  # Triton's checks and wording (model_config_utils.cc), with the values added
            if size <= 0:
                raise PyTritonModelConfigError(
                    f"dynamic batching preferred size must be positive for {self.model_name} (preferred_batch_size "
                    f"{preferred})")
            if size > self.max_batch_size:
                raise PyTritonModelConfigError(
                    f"dynamic batching preferred size must be <= max batch size for {self.model_name} "
                    f"(preferred_batch_size {preferred}, max_batch_size {self.max_batch_size})")
        if self.batcher is not None:
            _check_queue_policy(self.model_name, self.batcher)
        if self.sequence_batcher is not None:
            self.sequence_batcher.check(self.model_name, self.max_batch_size)
        if self.decoupled and self.response_cache:  # Triton's check and wording (model_config_utils.cc)
            raise PyTritonModelConfigError(
                f"Response Cache does not currently support model {self.model_name} with 'decoupled' transaction "
                "policy. Please disable the response cache.")
        self.input_by_name: dict[str, TensorSpec] = {s.name: s for s in self.inputs}
        self.ragged_inputs = frozenset(s.name for s in self.inputs if s.ragged)
        self.output_by_name: dict[str, TensorSpec] = {s.name: s for s in self.outputs}
        # What the model may return: its outputs and the output of each implicit state (a state output that is not
        # an output of the config goes to the sequence batcher only, never to a client)
        self.model_output_by_name: dict[str, TensorSpec] = dict(self.output_by_name)
        for state in self.sequence_batcher.states if self.sequence_batcher is not None else ():
            self.model_output_by_name.setdefault(state.output_name,
                                                 TensorSpec(state.output_name, state.datatype, state.dims))

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def instance_places(self) -> list[InstancePlace]:
        """Each instance's name, kind and GPU: those of every instance group, or of the one group (`instance_count`
        per listed GPU, named <model>_<gpu>_<c>, or CPU / KIND_MODEL instances named <model>_0_<c>)."""
        if self.instance_groups:
            return places(self.instance_groups)
        if not self.gpus:
            kind = "MODEL" if self.kind_model else "CPU"
            return [InstancePlace(f"{self.model_name}_0_{c}", kind) for c in range(self.instance_count)]
        return [InstancePlace(f"{self.model_name}_{gpu}_{c}", "GPU", gpu)
                for gpu in self.gpus for c in range(self.instance_count)]

    def instance_devices(self) -> list[int | None]:
        """The GPU of each instance (None: not pinned to one)."""
        return [place.device for place in self.instance_places()]

    def to_triton_dict(self) -> dict[str, Any]:
        """Triton's JSON model configuration (model_config.proto field names, int64 as numbers)."""

        def tensor(spec: TensorSpec, is_input: bool) -> dict[str, Any]:
            entry: dict[str, Any] = {
                "name": spec.name,
                "data_type": TRITON_TO_CONFIG[spec.datatype],
                "dims": list(spec.shape),
                **({"reshape": {"shape": list(spec.reshape)}} if spec.reshape is not None else {}),
                "is_shape_tensor": False,
                "is_non_linear_format_io": False,
            }
            if is_input:
                entry.update({"format": "FORMAT_NONE", "allow_ragged_batch": spec.ragged, "optional": spec.optional})
            else:
                entry["label_filename"] = self.label_filenames.get(spec.name, "")
            return entry

        devices = self.instance_devices()
        if self.instance_groups:
            groups = [group.to_triton_dict() for group in self.instance_groups]
        elif self.kind_model:  # (as Triton 2.51 names and shows it)
            groups = [{"name": f"{self.model_name}_0", "kind": "KIND_MODEL", "count": len(devices), "gpus": []}]
        elif self.gpus:
            groups = [
                {"name": f"{self.model_name}_{gpu}", "kind": "KIND_GPU", "count": self.instance_count, "gpus": [gpu]}
                for gpu in self.gpus
            ]
        else:
            groups = [{"name": self.model_name, "kind": "KIND_CPU", "count": len(devices), "gpus": []}]
        for group in groups:
            group.update({"secondary_devices": [], "profile": [], "passive": False, "host_policy": ""})

        config = {
            "name": self.model_name,
            "platform": "",
            "backend": self.backend,
            "runtime": "",
            "version_policy": self.version_policy or {"specific": {"versions": [self.model_version]}},
            "max_batch_size": self.max_batch_size,
            "input": [tensor(s, True) for s in self.inputs],
            "output": [tensor(s, False) for s in self.outputs],
            "batch_input": [dict(entry) for entry in self.batch_inputs],
            "batch_output": [dict(entry) for entry in self.batch_outputs],
            "optimization": {
                "priority": "PRIORITY_DEFAULT",
                "input_pinned_memory": {"enable": True},
                "output_pinned_memory": {"enable": True},
                "gather_kernel_buffer_threshold": 0,
                "eager_batching": False,
            },
            "instance_group": groups,
            "default_model_filename": self.default_model_filename,
            "cc_model_filenames": {},
            "metric_tags": {},
            "parameters": {k: {"string_value": v} for k, v in self.backend_parameters.items()},
            "model_warmup": [sample.to_triton_dict() for sample in self.warmup],
            # (a decoupled model's alone, as tritonserver 2.51 shows a config that does not set it, and NVIDIA PyTriton
            # writes it)
            **({"model_transaction_policy": {"decoupled": True}} if self.decoupled else {}),
            **({"dynamic_batching": self.batcher.to_triton_dict()} if self.batcher else {}),
            **({"response_cache": {"enable": True}} if self.response_cache else {}),
        }
        if self.sequence_batcher is not None:  # (in place of dynamic_batching: a model has one scheduler)
            config.pop("dynamic_batching", None)
            config["sequence_batching"] = self.sequence_batcher.to_triton_dict(self.max_batch_size)
        if self.ensemble_scheduling is not None:  # as Triton shows one: no backend, instances or optimization
            del config["optimization"]
            config.update({"platform": "ensemble", "backend": "", "instance_group": [], "default_model_filename": "",
                           "ensemble_scheduling": self.ensemble_scheduling,
                           "model_transaction_policy": {"decoupled": False}})  # (Triton 2.51 fills it in)
        return config

    def as_triton_shows(self) -> dict[str, Any]:
        """`to_triton_dict` with what tritonserver fills in when it loads a config (what its clients and its Python
        models see): a dynamic batcher without preferred batch sizes prefers the max batch size. (The scheduler goes
        by the config as given.)"""
        config = self.to_triton_dict()
        batching = config.get("dynamic_batching")
        if batching is not None and not batching["preferred_batch_size"] and self.max_batch_size > 0:
            batching["preferred_batch_size"] = [self.max_batch_size]
        return config

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict that `from_dict` turns back into an equal config (used to configure workers)."""
        return {
            "model_name": self.model_name,
            "model_version": self.model_version,
            "max_batch_size": self.max_batch_size,
            "instance_count": self.instance_count,
            "gpus": list(self.gpus),
            "decoupled": self.decoupled,
            "backend_parameters": dict(self.backend_parameters),
            "inputs": [dataclasses.asdict(s) for s in self.inputs],
            "outputs": [dataclasses.asdict(s) for s in self.outputs],
            "batcher": self.to_triton_dict().get("dynamic_batching") if self.batcher else None,
            "response_cache": self.response_cache,
            "strict": self.strict,
            "device": self.device,
            "labels": {name: list(labels) for name, labels in self.labels.items()},
            "label_filenames": dict(self.label_filenames),
            "version_policy": self.version_policy,
            "default_model_filename": self.default_model_filename,
            "ensemble_scheduling": self.ensemble_scheduling,
            "sequence_batcher": (self.sequence_batcher.to_triton_dict(self.max_batch_size, with_data=True)
                                 if self.sequence_batcher is not None else None),
            "kind_model": self.kind_model,
            "warmup": [sample.to_triton_dict(with_data=True) for sample in self.warmup],
            "batch_inputs": [dict(entry) for entry in self.batch_inputs],
            "batch_outputs": [dict(entry) for entry in self.batch_outputs],
            "instance_groups": [group.to_triton_dict() for group in self.instance_groups],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TritonModelConfig:
        fields = dict(data)
        fields["inputs"] = [TensorSpec(**s) for s in data["inputs"]]
        fields["outputs"] = [TensorSpec(**s) for s in data["outputs"]]
        fields["batcher"] = batcher_from_triton(data["batcher"]) if data.get("batcher") is not None else None
        sequence = data.get("sequence_batcher")
        fields["sequence_batcher"] = sequence_batcher_from_triton(sequence) if sequence is not None else None
        fields["warmup"] = warmup_from_triton(data.get("warmup") or [])
        fields["instance_groups"] = [InstanceGroup.from_triton_dict(g) for g in data.get("instance_groups") or []]
        return cls(**fields)

    @classmethod
    def from_triton_dict(cls, data: dict[str, Any]) -> TritonModelConfig:
        """Parse Triton's JSON model configuration (as `/config` or ModelConfig RPC as JSON return it)."""

        def specs(entries: list[dict[str, Any]]) -> list[TensorSpec]:
            return [
                TensorSpec(
                    e["name"],
                    CONFIG_TO_TRITON[e.get("data_type", "TYPE_FP32")],
                    tuple(int(d) for d in e.get("dims", [])),
                    bool(e.get("optional", False)),
                    ragged=bool(e.get("allow_ragged_batch", False)),
                )
                for e in entries
            ]

        groups = data.get("instance_group") or []
        gpus = [int(g) for group in groups for g in group.get("gpus", [])]
        count = int(groups[0].get("count", 1)) if groups else 1
        versions = (data.get("version_policy") or {}).get("specific", {}).get("versions") or [1]
        batcher = batcher_from_triton(data["dynamic_batching"]) if "dynamic_batching" in data else None
        return cls(
            model_name=data["name"],
            inputs=specs(data.get("input", [])),
            outputs=specs(data.get("output", [])),
            model_version=int(versions[0]),
            max_batch_size=int(data.get("max_batch_size", 0)),
            instance_count=max(count, 1),
            gpus=sorted(set(gpus)),
            decoupled=bool((data.get("model_transaction_policy") or {}).get("decoupled", False)),
            backend_parameters={k: v.get("string_value", "") for k, v in (data.get("parameters") or {}).items()},
            batcher=batcher,
            response_cache=bool((data.get("response_cache") or {}).get("enable", False)),
            sequence_batcher=(sequence_batcher_from_triton(data["sequence_batching"]) if "sequence_batching" in data
                              else None),
            kind_model=bool(groups) and groups[0].get("kind") == "KIND_MODEL",
            warmup=warmup_from_triton(data.get("model_warmup") or []),
            batch_inputs=[dict(entry) for entry in data.get("batch_input") or []],
            batch_outputs=[dict(entry) for entry in data.get("batch_output") or []],
            instance_groups=[InstanceGroup.from_triton_dict(g) for g in groups] if len(groups) > 1 else [],
        )


def _queue_policy(data: dict[str, Any]) -> QueuePolicy:
    return QueuePolicy(
        timeout_action=enum_member(TimeoutAction, data.get("timeout_action", "REJECT"), "timeout_action"),
        default_timeout_microseconds=int(data.get("default_timeout_microseconds", 0)),
        allow_timeout_override=bool(data.get("allow_timeout_override", False)),
        max_queue_size=int(data.get("max_queue_size", 0)),
    )


def _check_queue_policy(name: str, batcher: DynamicBatcher) -> None:
    """Triton's checks of priority levels and queue policies (model_config_utils.cc), with its wording."""
    levels = batcher.priority_levels
    if levels:
        if not 1 <= batcher.default_priority_level <= levels:
            raise PyTritonModelConfigError(f"default priority level must be in range [1, {levels}] for {name}")
        if any(not 1 <= level <= levels for level in batcher.priority_queue_policy or {}):
            raise PyTritonModelConfigError(
                f"priority queue policy must have priority level in range [1, {levels}] for {name}")
    if batcher.preserve_ordering:
        if levels > 1:
            raise PyTritonModelConfigError(
                f"Only one priority level is allowed when 'preserve_ordering' is true for {name}")
        policies = [batcher.default_queue_policy, *(batcher.priority_queue_policy or {}).values()]
        if any(p is not None and p.default_timeout_microseconds and p.timeout_action == TimeoutAction.DELAY
               for p in policies):
            raise PyTritonModelConfigError(
                f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}")


def batcher_from_triton(data: dict[str, Any]) -> DynamicBatcher:
    default = data.get("default_queue_policy")
    priority = data.get("priority_queue_policy") or {}
    return DynamicBatcher(
        max_queue_delay_microseconds=int(data.get("max_queue_delay_microseconds", 0)),
        preferred_batch_size=[int(x) for x in data.get("preferred_batch_size", [])] or None,
        preserve_ordering=bool(data.get("preserve_ordering", False)),
        priority_levels=int(data.get("priority_levels", 0)),
        default_priority_level=int(data.get("default_priority_level", 0)),
        default_queue_policy=_queue_policy(default) if default else None,
        priority_queue_policy={int(k): _queue_policy(v) for k, v in priority.items()} or None,
    )
