"""Triton's JSON rendering of a model configuration (what HTTP `/config` returns).

The model config is parsed into `model_config.proto` and printed with every field (as Triton does), then
64-bit integer fields, which protobuf's JSON prints as strings, are turned back into numbers.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from tritonclient.grpc import model_config_pb2

from pytriton.model_config.triton_model_config import TritonModelConfig

_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


def model_config_proto(config: TritonModelConfig) -> Any:
    return json_format.ParseDict(config.to_triton_dict(), model_config_pb2.ModelConfig())


def _intify(value: Any, descriptor: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key, item in value.items():
        field = descriptor.fields_by_name.get(key)
        if field is None:
            continue
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                if value_field.message_type is not None:
                    for k in item:
                        _intify(item[k], value_field.message_type)
                elif value_field.type in _INT64:
                    for k in item:
                        item[k] = int(item[k])
            elif isinstance(item, list):
                for element in item:
                    _intify(element, field.message_type)
            else:
                _intify(item, field.message_type)
        elif field.type in _INT64:
            value[key] = [int(v) for v in item] if isinstance(item, list) else int(item)
    return value


def model_config_json(config: TritonModelConfig) -> dict[str, Any]:
    proto = model_config_proto(config)
    data = json_format.MessageToDict(
        proto, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return _intify(data, model_config_pb2.ModelConfig.DESCRIPTOR)
