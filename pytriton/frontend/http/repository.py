"""The HTTP repository extension's load parameters as the controller takes them: `file:` contents base64-decoded."""

from __future__ import annotations

import base64
from typing import Any

from pytriton.exceptions import invalid_arg


def load_parameters(body: Any) -> dict[str, str | bytes]:
    """The `parameters` of a load request's JSON body; INVALID_ARG naming what is malformed."""
    parameters = body.get("parameters", {}) if isinstance(body, dict) else None
    if not isinstance(parameters, dict):
        raise invalid_arg("'parameters' must be a JSON object")
    values: dict[str, str | bytes] = {}
    for key, value in parameters.items():
        if not isinstance(value, str):  # (a 400 with tritonserver 2.51's reason; its answer is a 500)
            raise invalid_arg(f"Unable to parse '{key}': attempt to access JSON non-string as string")
        if key.startswith("file:"):
            try:
                values[key] = base64.b64decode(value, validate=True)
            except ValueError:  # binascii.Error, or a character that is not ASCII
                raise invalid_arg(f"parameter '{key}': the file's content must be base64") from None
        else:
            values[key] = value
    return values


def unload_dependents(body: Any) -> bool:
    """Whether an unload request asks for the model's dependents to be unloaded too."""
    parameters = body.get("parameters", {}) if isinstance(body, dict) else {}
    return isinstance(parameters, dict) and parameters.get("unload_dependents") is True
