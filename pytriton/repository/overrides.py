"""A load request's `config` parameter (a model configuration in JSON that replaces the model's `config.pbtxt`):
its size and nesting depth are bounded (`RepositoryLimits`) before it becomes a `ModelConfig`, so that a client cannot
make the server build objects far larger than what it sent."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.config.repository_limits import RepositoryLimits
from pytriton.exceptions import ServerError, invalid_arg


def _too_deep(value: Any, limit: int) -> bool:
    """Whether JSON `value` nests objects and arrays more than `limit` levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def parse_override(name: str, text: str | bytes, limits: RepositoryLimits) -> pb.ModelConfig:
    """The `ModelConfig` of a load's `config` parameter; INVALID_ARG naming the model when it is too large, too deeply
    nested or no model configuration."""
    def refused(problem: str) -> ServerError:
        return invalid_arg(f"failed to load '{name}': the 'config' parameter {problem}")

    if not isinstance(text, (str, bytes)):  # (a gRPC client may send an int64 or a bool parameter)
        raise refused("must be a string holding a model configuration in JSON")
    limit = limits.max_config_bytes
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text  # (bounded by the front-ends)
    if len(data) > limit:
        raise refused(f"is {len(data)} bytes, larger than the limit of {limit} bytes")
    try:
        document = json.loads(data)
    except RecursionError:
        raise refused(f"is nested deeper than {limits.max_config_depth} levels") from None
    except ValueError as exc:  # (UnicodeDecodeError too)
        raise refused(f"is not a valid model configuration in JSON: {exc}") from None
    if _too_deep(document, limits.max_config_depth):
        raise refused(f"is nested deeper than {limits.max_config_depth} levels")
    try:
        return json_format.ParseDict(document, pb.ModelConfig())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise refused(f"is not a valid model configuration in JSON: {exc}") from None


__all__ = ["parse_override"]
