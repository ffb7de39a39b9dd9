"""`pb_utils.ModelConfig`: the object a Triton Python-backend model's `auto_complete_config(config)` gets and returns,
with Triton's methods (`as_dict`, `set_max_batch_size`, `set_dynamic_batching`, `add_input`, `add_output`,
`set_model_transaction_policy`), their checks and their error wording.

The method runs in a short-lived process of its own (`pytriton.backends.autocomplete`), never in the server.
"""

from __future__ import annotations

import json
from typing import Any

_INPUT_PROPERTIES = ("name", "data_type", "dims", "optional")
_OUTPUT_PROPERTIES = ("name", "data_type", "dims")


class ModelConfig:
    """The model configuration being auto-completed: what `config.pbtxt` said (Triton's JSON form, every field
    present), to which `auto_complete_config` adds the model's inputs, outputs, batch size, batching and decoupled
    policy."""

    def __init__(self, model_config: str | dict[str, Any]):
        self._model_config: dict[str, Any] = (json.loads(model_config) if isinstance(model_config, str)
                                              else dict(model_config))
        self._model_config.setdefault("name", "")
        self._model_config.setdefault("max_batch_size", 0)
        self._model_config.setdefault("input", [])
        self._model_config.setdefault("output", [])

    @property
    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def as_dict(self) -> dict[str, Any]:
        """The configuration as it stands (read it; change it through the methods)."""
        return self._model_config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set `max_batch_size`; ValueError when the configuration already gives a larger one."""
        configured = self._model_config.get("max_batch_size", 0)
        if configured > max_batch_size:
            raise ValueError(f"configuration specified max_batch_size {configured}, but in auto-complete-config "
                             f"function for model '{self._name}' specified max_batch_size {max_batch_size}")
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """Make the dynamic batcher (with its defaults) the model's scheduler, unless it already is; ValueError when
        the configuration chose another scheduler."""
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(f"Configuration specified scheduling_choice as '{scheduler}', but "
                                 f"auto-complete-config function for model '{self._name}' tries to set "
                                 "scheduling_choice as 'dynamic_batching'")
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:  # Triton's parameter name
        """Add an input (`name`, `data_type`, `dims`, optional `optional`), or complete the configuration's input of
        that name; ValueError when it conflicts with what the configuration says."""
        self._add("input", input, _INPUT_PROPERTIES)

    def add_output(self, output: dict[str, Any]) -> None:
        """Add an output (`name`, `data_type`, `dims`), or complete the configuration's output of that name;
        ValueError when it conflicts with what the configuration says."""
        self._add("output", output, _OUTPUT_PROPERTIES)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """Set `model_transaction_policy` (its only property: `decoupled`); ValueError when the configuration already
        set `decoupled` to the other value."""
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(f"model transaction property in auto-complete-config function for model "
                                 f"'{self._name}' contains property other than 'decoupled'.")
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(f"trying to change decoupled property in auto-complete-config for model "
                                 f"'{self._name}', which is already set to '{policy['decoupled']}'.")
            policy["decoupled"] = wanted

    def _add(self, kind: str, tensor: dict[str, Any], properties: tuple[str, ...]) -> None:
        model = self._name
        label = f"{kind} '{tensor['name']}'" if "name" in tensor else kind
        for key in tensor:
            if key not in properties:
                allowed = ", ".join(f"'{p}'" for p in properties[:-1]) + f" and '{properties[-1]}'"
                raise ValueError(f"{label} in auto-complete-config function for model '{model}' contains property "
                                 f"other than {allowed}.")
        for required in ("name", "data_type", "dims"):
            if required not in tensor:
                raise ValueError(f"{label} in auto-complete-config function for model '{model}' is missing "
                                 f"'{required}' property.")
        name = tensor["name"]
        for current in self._model_config.setdefault(kind, []):
            if current.get("name") != name:
                continue
            configured_type = current.get("data_type", "TYPE_INVALID")
            configured_dims = current.get("dims") or []
            if configured_type != "TYPE_INVALID" and configured_type != tensor["data_type"]:
                raise ValueError(f"unable to load model '{model}', configuration expects datatype {configured_type} "
                                 f"for {kind} '{name}', model provides {tensor['data_type']}")
            if configured_dims and list(configured_dims) != list(tensor["dims"]):
                raise ValueError(f"model '{model}', tensor '{name}': the model expects dims {list(tensor['dims'])} "
                                 f"but the model configuration specifies dims {list(configured_dims)}")
            if "optional" in current and "optional" in tensor and current["optional"] != tensor["optional"]:
                raise ValueError(f"model '{model}', tensor '{name}': the model expects optional {tensor['optional']} "
                                 f"but the model configuration specifies optional {current['optional']}")
            current["data_type"] = tensor["data_type"]
            current["dims"] = list(tensor["dims"])
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        self._model_config[kind].append(dict(tensor))


__all__ = ["ModelConfig"]
