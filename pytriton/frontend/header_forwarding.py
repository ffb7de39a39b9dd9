"""Triton's header forwarding (`--http-header-forward-pattern`, `--grpc-header-forward-pattern`).

Headers whose name matches the pattern anywhere (RE2 PartialMatch), case-insensitively, become string
request parameters of the callable. Names Triton reserves for its own parameters are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pytriton.exceptions import invalid_arg

# Triton's kReservedParameterKeys (server `common.h`): request parameters a forwarded header may not set.
RESERVED_HEADER_KEYS = frozenset(
    ("sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers", "binary_data_output")
)


def compile_forward_pattern(pattern: str) -> re.Pattern[str]:
    """Triton prefixes the pattern with RE2's `(?i)`; a pattern starting with `(?-i)` turns that off again
    (Python's `re` only takes that as flags, so it is translated). Raises re.error for a bad pattern."""
    if pattern.startswith("(?-i)"):
        return re.compile(pattern[len("(?-i)") :])
    return re.compile(pattern, re.IGNORECASE)


def forward_headers(pattern: re.Pattern[str], headers: Iterable[tuple[str, Any]], parameters: dict[str, Any]) -> None:
    """Copy matching (string-valued) headers into `parameters`, or refuse a reserved name."""
    for key, value in headers:
        if not isinstance(value, str) or not pattern.search(key):
            continue
        if key in RESERVED_HEADER_KEYS or key.startswith("triton_"):
            raise invalid_arg(f"Header '{key}' is reserved for Triton usage and cannot be forwarded.")
        parameters[key] = value
