"""What a model may be called: Triton's rules for a load's model name (not empty, no '/', not '..'; its wording), and
no control characters (a newline in a name would split log lines, metric label values and error messages)."""

from __future__ import annotations

import unicodedata

# Unicode categories refused in a name: C0/C1 controls and DEL (Cc), the line and paragraph separators (Zl, Zp).
_CONTROL_CATEGORIES = ("Cc", "Zl", "Zp")


def shown(name: str) -> str:
    """`name` with its control characters escaped (`\\n`, `\\x00`), so that a message quoting it stays one line."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _CONTROL_CATEGORIES else c for c in name)


def model_name_problem(name: str) -> str | None:
    """Why `name` cannot name a model (Triton's message where Triton refuses it too), or None when it can."""
    if not name.strip():
        return "Model name cannot be empty. Please enter a valid name to deploy."
    if "/" in name or name.strip() in (".", ".."):
        return f"invalid model name '{shown(name)}', model name must not contain path traversal characters"
    if any(unicodedata.category(c) in _CONTROL_CATEGORIES for c in name):
        return f"invalid model name '{shown(name)}', model name must not contain control characters"
    return None


__all__ = ["model_name_problem", "shown"]
