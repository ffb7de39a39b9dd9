"""Triton's JSON rendering of a model configuration (what HTTP `/config` returns).

The model config is parsed into `model_config.proto` and printed with every field (as Triton does), then
64-bit integer fields, which protobuf's JSON prints as strings, are turned back into numbers.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from pytriton.model_config.proto_json import int64_as_numbers
from pytriton.model_config.triton_model_config import TritonModelConfig


def model_config_proto(config: TritonModelConfig) -> Any:
    return json_format.ParseDict(config.as_triton_shows(), model_config_pb2.ModelConfig())


def model_config_json(config: TritonModelConfig) -> dict[str, Any]:
    proto = model_config_proto(config)
    data: dict[str, Any] = json_format.MessageToDict(
        proto, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    scheduling = data.get("ensemble_scheduling")
    if scheduling is not None and not scheduling.get("max_inflight_requests"):  # (a field newer than tritonserver
        scheduling.pop("max_inflight_requests", None)  # 2.51, whose JSON this follows: shown only when set)
    return int64_as_numbers(data, model_config_pb2.ModelConfig.DESCRIPTOR)
