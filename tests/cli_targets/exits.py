"""A model module whose import ends its process at once (no exception to report)."""

import os

os._exit(3)
