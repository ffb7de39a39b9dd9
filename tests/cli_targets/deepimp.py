"""A model module whose import fails two calls deep (the traceback must show this file and line)."""

import json


def _load_settings():
    return json.loads("{oops}")


SETTINGS = _load_settings()
