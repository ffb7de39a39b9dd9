"""Triton writes a model configuration's 64-bit integers as JSON numbers; protobuf's JSON form writes them as strings.
`int64_as_numbers` turns them back, for the HTTP `/config` answer and for the configuration a Python-backend model is
given (auto-complete)."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor

_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}

_T = TypeVar("_T")


def int64_as_numbers(value: _T, descriptor: Any) -> _T:
    """`value` (protobuf's JSON form of a message of type `descriptor`), its 64-bit integers made numbers in place."""
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
                        int64_as_numbers(item[k], value_field.message_type)
                elif value_field.type in _INT64:
                    for k in item:
                        item[k] = int(item[k])
            elif isinstance(item, list):
                for element in item:
                    int64_as_numbers(element, field.message_type)
            else:
                int64_as_numbers(item, field.message_type)
        elif field.type in _INT64:
            value[key] = [int(v) for v in item] if isinstance(item, list) else int(item)
    return value


__all__ = ["int64_as_numbers"]
